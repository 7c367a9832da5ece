// A real receiver for the CLI tests: `wrangler dev` on free ports, with its own on-disk state, its own dev
// registry (so another local session cannot take its queue messages), and a config that adds one source per
// provider to the project's own wrangler.toml.
import assert from "node:assert/strict";
import { execFile, execFileSync, spawn } from "node:child_process";
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { copyMigratedState } from "./migrated-state.mjs";

export const ROOT = resolve(import.meta.dirname, "../..");
/** The Worker under test (its wrangler.toml, src and migrations): this checkout unless CLI_TEST_WORKER_ROOT says another. */
const WORKER_ROOT = resolve(process.env.CLI_TEST_WORKER_ROOT ?? ROOT);
const WRANGLER = join(ROOT, "node_modules", ".bin", "wrangler");
const CLI = join(ROOT, "scripts", "cli", "index.mjs");
const quietEnv = { ...process.env, CI: "true", WRANGLER_SEND_METRICS: "false", NO_COLOR: "1" };

/**
 * How long the tests wait for anything, named once and generous: they assert what happens, never how fast, and a
 * loaded machine (a load average of 8 and more on 2 cores) is many times slower than a quiet one. A command reads
 * the config with wrangler's own reader, about 2 CPU-seconds alone: at a load of 25 one `send` took over a minute.
 */
export const WAIT = {
  /** One CLI command run to completion. */
  command: 300_000,
  /** `wrangler dev` (or `npm start`) answering /health. */
  receiverStart: 300_000,
  /** A long-running command (tail, echo) printing what a test waits for, or the pipeline finishing an event. */
  output: 120_000,
};

/** A port nobody listens on right now. */
export async function freePort() {
  const server = createServer();
  await new Promise((done) => server.listen(0, "127.0.0.1", () => done(undefined)));
  const { port } = /** @type {import("node:net").AddressInfo} */ (server.address());
  await new Promise((done) => server.close(done));
  return port;
}

const hmacSecret = () => randomBytes(24).toString("hex");

/** Asymmetric senders: the source lists the public key; the CLI signs with NAME_PRIVATE_KEY. */
function keyPair(/** @type {"ed25519" | "whpk" | "p256"} */ kind) {
  const pair = kind === "p256" ? generateKeyPairSync("ec", { namedCurve: "P-256" }) : generateKeyPairSync("ed25519");
  const spki = pair.publicKey.export({ format: "der", type: "spki" });
  return {
    publicKey:
      kind === "p256"
        ? spki.toString("base64")
        : kind === "whpk"
          ? `whpk_${spki.subarray(-32).toString("base64")}`
          : spki.subarray(-32).toString("hex"),
    privateKey: pair.privateKey.export({ format: "der", type: "pkcs8" }).toString("base64"),
  };
}

/**
 * One source per provider (and alias), each with its own secret. `extra` is written into the source's table.
 * @type {{ name: string, provider: string, secret: "hmac" | "whsec" | "ed25519" | "whpk" | "p256" | "basic" | "topic-arn", extra?: string }[]}
 */
export const PROVIDER_SOURCES = [
  { name: "cli-svix", provider: "svix", secret: "whsec" },
  { name: "cli-svix-v1a", provider: "standard-webhooks", secret: "whpk" },
  { name: "cli-stripe", provider: "stripe", secret: "hmac" },
  { name: "cli-github", provider: "github", secret: "hmac" },
  { name: "cli-shopify", provider: "shopify", secret: "hmac" },
  { name: "cli-slack", provider: "slack", secret: "hmac" },
  { name: "cli-twilio", provider: "twilio", secret: "hmac" },
  { name: "cli-paddle", provider: "paddle", secret: "hmac" },
  { name: "cli-linear", provider: "linear", secret: "hmac" },
  {
    name: "cli-square",
    provider: "square",
    secret: "hmac",
    extra: 'notification_url = "https://hooks.example.com/webhooks/cli-square"',
  },
  { name: "cli-twitch", provider: "twitch", secret: "hmac" },
  { name: "cli-zoom", provider: "zoom", secret: "hmac" },
  { name: "cli-gitlab", provider: "gitlab", secret: "hmac" },
  { name: "cli-intercom", provider: "intercom", secret: "hmac" },
  { name: "cli-mailgun", provider: "mailgun", secret: "hmac" },
  { name: "cli-sendgrid", provider: "sendgrid", secret: "p256" },
  { name: "cli-ed25519", provider: "ed25519", secret: "ed25519" },
  { name: "cli-discord", provider: "discord", secret: "ed25519" },
  { name: "cli-clerk", provider: "clerk", secret: "whsec" },
  { name: "cli-resend", provider: "resend", secret: "whsec" },
  { name: "cli-brex", provider: "brex", secret: "whsec" },
  { name: "cli-openai", provider: "openai", secret: "whsec" },
  { name: "cli-meta", provider: "meta", secret: "hmac" },
  { name: "cli-whatsapp", provider: "whatsapp", secret: "hmac" },
  { name: "cli-instagram", provider: "instagram", secret: "hmac" },
  { name: "cli-messenger", provider: "messenger", secret: "hmac" },
  { name: "cli-dropbox", provider: "dropbox", secret: "hmac" },
  { name: "cli-okta", provider: "okta", secret: "hmac" },
  { name: "cli-microsoft-graph", provider: "microsoft-graph", secret: "hmac" },
  // Asana and Notion hand their signing secret over in a handshake: the listed secret is the URL's verify token.
  { name: "cli-asana", provider: "asana", secret: "hmac" },
  { name: "cli-notion", provider: "notion", secret: "hmac" },
  { name: "cli-monday", provider: "monday", secret: "hmac" },
  { name: "cli-netlify", provider: "netlify", secret: "hmac" },
  { name: "cli-adyen", provider: "adyen", secret: "hmac" },
  { name: "cli-aws-sns", provider: "aws-sns", secret: "topic-arn" },
  {
    name: "cli-plaid",
    provider: "plaid",
    secret: "hmac",
    extra: 'client_id = "cli-test-client"\nenvironment = "sandbox"',
  },
  { name: "cli-hubspot", provider: "hubspot", secret: "hmac" },
  { name: "cli-zendesk", provider: "zendesk", secret: "hmac" },
  { name: "cli-woocommerce", provider: "woocommerce", secret: "hmac" },
  { name: "cli-typeform", provider: "typeform", secret: "hmac" },
  { name: "cli-calendly", provider: "calendly", secret: "hmac" },
  { name: "cli-vercel", provider: "vercel", secret: "hmac" },
  { name: "cli-sentry", provider: "sentry", secret: "hmac" },
  { name: "cli-mux", provider: "mux", secret: "hmac" },
  { name: "cli-pagerduty", provider: "pagerduty", secret: "hmac" },
  { name: "cli-lemonsqueezy", provider: "lemonsqueezy", secret: "hmac" },
  { name: "cli-razorpay", provider: "razorpay", secret: "hmac" },
  { name: "cli-coinbase-commerce", provider: "coinbase-commerce", secret: "hmac" },
  { name: "cli-bitbucket", provider: "bitbucket", secret: "hmac" },
  { name: "cli-box", provider: "box", secret: "hmac" },
  { name: "cli-docusign", provider: "docusign", secret: "hmac" },
  { name: "cli-telegram", provider: "telegram", secret: "hmac" },
  { name: "cli-postmark", provider: "postmark", secret: "basic" },
  {
    name: "cli-generic",
    provider: "generic",
    secret: "hmac",
    extra: [
      'signature_header = "x-acme-signature"',
      'algorithm = "hmac-sha512"',
      'encoding = "base64"',
      'signature_prefix = "v1="',
      'signed_content = "{id}.{timestamp}.{body}"',
      'id_header = "x-acme-id"',
      'timestamp_header = "x-acme-timestamp"',
      'event_key_header = "x-acme-id"',
      'type_path = "type"',
    ].join("\n"),
  },
];

const secretName = (/** @type {string} */ source) => `${source.toUpperCase().replace(/-/g, "_")}_SECRET`;

/**
 * The project's wrangler.toml with absolute paths (it is written elsewhere) plus the test's sources.
 * @param {number} echoPort where the forwarding source sends
 */
export function testConfig(echoPort) {
  let text = readFileSync(join(WORKER_ROOT, "wrangler.toml"), "utf8");
  const rewritten = text
    .replace(/^main\s*=\s*"([^"]+)"/m, (_, path) => `main = ${JSON.stringify(join(WORKER_ROOT, path))}`)
    .replace(
      /^(\s*)migrations_dir\s*=\s*"([^"]+)"/gm,
      (_, indent, path) => `${indent}migrations_dir = ${JSON.stringify(join(WORKER_ROOT, path))}`,
    );
  assert.notEqual(rewritten, text, "wrangler.toml has no main/migrations_dir to point at the project");
  text = rewritten;
  const tables = PROVIDER_SOURCES.map(
    (source) =>
      `\n[vars.SOURCES.${source.name}]\nprovider = "${source.provider}"\nsecrets = ["${secretName(source.name)}"]\ndestination = "none"\n${source.extra ?? ""}\n`,
  );
  tables.push(
    `\n[vars.SOURCES.cli-forward]\nprovider = "github"\nsecrets = ["${secretName("cli-forward")}"]\ndestination = "http://127.0.0.1:${echoPort}/hooks"\n`,
  );
  return text + tables.join("");
}

/** .dev.vars for the test receiver: the demo's names plus one secret (or key pair) per test source. */
export function testDevVars() {
  const lines = [
    `DEMO_WEBHOOK_SECRET="whsec_${randomBytes(32).toString("base64")}"`,
    `GATEWAY_SIGNING_SECRET="whsec_${randomBytes(32).toString("base64")}"`,
    `ADMIN_TOKEN="cli-test-admin-${randomBytes(12).toString("hex")}"`,
    `${secretName("cli-forward")}="${hmacSecret()}"`,
  ];
  for (const source of PROVIDER_SOURCES) {
    const name = secretName(source.name);
    if (source.secret === "hmac") lines.push(`${name}="${hmacSecret()}"`);
    else if (source.secret === "basic") lines.push(`${name}="hooks:${hmacSecret()}"`);
    else if (source.secret === "topic-arn") lines.push(`${name}="arn:aws:sns:eu-west-1:123456789012:cli-test"`);
    else if (source.secret === "whsec") lines.push(`${name}="whsec_${randomBytes(32).toString("base64")}"`);
    else {
      const pair = keyPair(source.secret);
      lines.push(`${name}="${pair.publicKey}"`, `${name}_PRIVATE_KEY="${pair.privateKey}"`);
    }
  }
  return `${lines.join("\n")}\n`;
}

/**
 * Starts the receiver; answers its URL and a stop function. `testScheduled` opens GET /__scheduled, which runs the cron.
 * @param {{ configPath: string, envFile: string, workDir: string, testScheduled?: boolean }} files
 */
export async function startReceiver(files) {
  const port = await freePort();
  const inspectorPort = await freePort();
  const persistTo = join(files.workDir, "state");
  // DB migrated by wrangler once per set of migrations, not once per receiver (./migrated-state.mjs). A test that
  // prepared its own state (seeded rows, a second database) keeps it: wrangler brings its DB up to date in place.
  if (existsSync(persistTo))
    execFileSync(
      WRANGLER,
      ["d1", "migrations", "apply", "DB", "--local", "--config", files.configPath, "--persist-to", persistTo],
      { env: quietEnv, stdio: "pipe" },
    );
  else copyMigratedState(WORKER_ROOT, persistTo, quietEnv);
  const worker = spawn(
    WRANGLER,
    [
      "dev",
      "--config",
      files.configPath,
      "--ip",
      "127.0.0.1",
      "--port",
      String(port),
      "--inspector-port",
      String(inspectorPort),
      "--persist-to",
      persistTo,
      "--env-file",
      files.envFile,
      "--show-interactive-dev-session=false",
      "--log-level",
      "warn",
      ...(files.testScheduled ? ["--test-scheduled"] : []),
    ],
    {
      detached: true,
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...quietEnv, WRANGLER_REGISTRY_PATH: `${persistTo}-registry` },
    },
  );
  let log = "";
  worker.stdout.on("data", (chunk) => (log += chunk));
  worker.stderr.on("data", (chunk) => (log += chunk));
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + WAIT.receiverStart;
  for (;;) {
    if (worker.exitCode !== null) throw new Error(`wrangler dev exited:\n${log}`);
    // A Worker that fails at startup leaves connections hanging: each probe gets its own deadline.
    if (
      await fetch(`${url}/health`, { signal: AbortSignal.timeout(2000) }).then(
        (response) => response.ok,
        () => false,
      )
    )
      break;
    if (/Uncaught \w*Error/.test(log)) throw new Error(`the Worker failed to start:\n${log.slice(-3000)}`);
    if (Date.now() > deadline) throw new Error(`wrangler dev did not answer on ${url}:\n${log}`);
    await new Promise((done) => setTimeout(done, 250));
  }
  return {
    url,
    log: () => log,
    async stop() {
      if (worker.pid && worker.exitCode === null) {
        process.kill(-worker.pid, "SIGTERM");
        await new Promise((done) => worker.once("exit", done));
      }
    },
  };
}

/**
 * Runs `node scripts/dev.mjs …` (`npm start`) from the project root, with a wrangler registry in `workDir`; `stop()`
 * ends it and everything it started.
 */
export function startDevScript(
  /** @type {string} */ workDir,
  /** @type {string[]} */ args,
  /** @type {Record<string, string>} */ extraEnv = {},
) {
  const child = spawn(process.execPath, ["scripts/dev.mjs", ...args], {
    cwd: ROOT,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
    env: {
      ...process.env,
      CI: "true",
      NO_COLOR: "1",
      WRANGLER_SEND_METRICS: "false",
      WRANGLER_REGISTRY_PATH: join(workDir, "registry"),
      ...extraEnv,
    },
  });
  let stdout = "";
  let stderr = "";
  child.stdout.on("data", (chunk) => (stdout += chunk));
  child.stderr.on("data", (chunk) => (stderr += chunk));
  const exited = new Promise((done) => child.once("exit", (code) => done(code)));
  return {
    output: () => ({ stdout, stderr }),
    exited,
    async stop() {
      if (child.exitCode === null && child.pid) {
        process.kill(-child.pid, "SIGTERM");
        await exited;
      }
    },
  };
}

/**
 * Waits until a receiver started by `startDevScript` answers /health on `port`; fails at once, with its output, if
 * `npm start` exits first. A loaded machine has taken minutes to start wrangler dev, hence the generous deadline.
 */
export async function answering(
  /** @type {ReturnType<typeof startDevScript>} */ run,
  /** @type {number} */ port,
  deadlineMs = WAIT.receiverStart,
) {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    if (
      await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(2000) }).then(
        (response) => response.ok,
        () => false,
      )
    )
      return;
    const code = await Promise.race([run.exited, new Promise((done) => setTimeout(() => done("running"), 250))]);
    assert.equal(code, "running", `npm start exited:\n${run.output().stdout}${run.output().stderr}`);
    assert.ok(Date.now() < deadline, `nothing answered on ${port}:\n${run.output().stdout}${run.output().stderr}`);
  }
}

export function makeWorkDir() {
  return mkdtempSync(join(tmpdir(), "receiver-cli-"));
}

export function writeFile(/** @type {string} */ dir, /** @type {string} */ name, /** @type {string} */ text) {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

/**
 * Runs the CLI to completion.
 * @param {string[]} args
 * @param {Record<string, string>} [env]
 * @returns {Promise<{ code: number, stdout: string, stderr: string }>}
 */
export async function cli(args, env = {}) {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, [CLI, ...args], {
      cwd: ROOT,
      env: { ...quietEnv, ...env },
      timeout: WAIT.command,
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = /** @type {{ code?: number, killed?: boolean, stdout?: string, stderr?: string }} */ (error);
    // Killed at WAIT.command: said in the output, so a failure names the wait rather than an exit code of -1.
    const killed = failed.killed ? `\n(npm run cli -- ${args.join(" ")} killed after ${WAIT.command} ms)` : "";
    return {
      code: typeof failed.code === "number" ? failed.code : -1,
      stdout: failed.stdout ?? "",
      stderr: `${failed.stderr ?? ""}${killed}`,
    };
  }
}

/** Long-running commands still alive: a failed test must not leave one holding the run open. */
const running = new Set();

export function stopLeftoverCommands() {
  for (const child of running) child.kill("SIGTERM");
}

/**
 * Starts a long-running CLI command (tail, echo); `waitFor` resolves once its output matches.
 * @param {string[]} args
 * @param {Record<string, string>} [env]
 */
export function cliProcess(args, env = {}) {
  const child = spawn(process.execPath, [CLI, ...args], {
    cwd: ROOT,
    env: { ...quietEnv, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  running.add(child);
  child.once("exit", () => running.delete(child));
  let output = "";
  child.stdout.on("data", (chunk) => (output += chunk));
  child.stderr.on("data", (chunk) => (output += chunk));
  return {
    output: () => output,
    async waitFor(/** @type {RegExp} */ pattern, timeoutMs = WAIT.output) {
      const deadline = Date.now() + timeoutMs;
      while (!pattern.test(output)) {
        if (child.exitCode !== null)
          throw new Error(`the command exited (${child.exitCode}) before printing ${pattern}:\n${output}`);
        if (Date.now() > deadline) throw new Error(`no ${pattern} within ${timeoutMs} ms:\n${output}`);
        await new Promise((done) => setTimeout(done, 100));
      }
    },
    /** Ctrl-C, as a person stops it; answers the exit code. */
    async interrupt() {
      if (child.exitCode !== null) return child.exitCode;
      child.kill("SIGINT");
      return new Promise((done) => child.once("exit", (code) => done(code)));
    },
  };
}
