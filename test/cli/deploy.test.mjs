/**
 * `npm run deploy`'s checks, with a stand-in `npx` on PATH that records what it is asked and deploys nothing (the
 * tests have no network): a placeholder database id and a leftover `SOURCES = {}` stop it before wrangler runs,
 * each naming the line and the fix; a config without either reaches the dry run and the deploy.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { chmodSync, existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { after, test } from "node:test";
import { promisify } from "node:util";
import { cli, makeWorkDir, ROOT, writeFile } from "./receiver.mjs";

const workDir = makeWorkDir();
after(() => rmSync(workDir, { recursive: true, force: true }));

const PLACEHOLDER = "00000000-0000-0000-0000-000000000000";
const REAL_ID = "4f1c2b3a-9d8e-4f70-a1b2-c3d4e5f60718";

/** The project's wrangler.toml, written elsewhere with `main` absolute, after `edit`. */
function config(/** @type {string} */ name, /** @type {(text: string) => string} */ edit) {
  const text = readFileSync(join(ROOT, "wrangler.toml"), "utf8").replace(
    /^main\s*=\s*"([^"]+)"/m,
    (_, path) => `main = ${JSON.stringify(join(ROOT, path))}`,
  );
  return writeFile(workDir, name, edit(text));
}

/** The production database's id filled in, as after `npx wrangler d1 create`. */
const withRealId = (/** @type {string} */ text) =>
  text.replace(
    /(\[\[env\.production\.d1_databases\]\][^[]*?database_id = )"0{8}-0{4}-0{4}-0{4}-0{12}"/,
    `$1"${REAL_ID}"`,
  );
const STRIPE_TABLE =
  '\n[env.production.vars.SOURCES.stripe-live]\nprovider = "stripe"\nsecrets = ["STRIPE_LIVE_SECRET"]\n';

/** Runs scripts/deploy.mjs with the stand-in npx; answers its result and every npx call it made. */
async function deploy(/** @type {string[]} */ args) {
  const bin = join(workDir, `bin-${Math.random().toString(36).slice(2)}`);
  mkdirSync(bin);
  const calls = join(bin, "calls");
  writeFile(bin, "npx", `#!/bin/sh\necho "$@" >> "${calls}"\n`);
  chmodSync(join(bin, "npx"), 0o755);
  let result;
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, ["scripts/deploy.mjs", ...args], {
      cwd: ROOT,
      env: { ...process.env, PATH: `${bin}:${process.env.PATH}`, NO_COLOR: "1", WRANGLER_SEND_METRICS: "false" },
    });
    result = { code: 0, stdout, stderr };
  } catch (error) {
    const failed = /** @type {{ code: number, stdout: string, stderr: string }} */ (error);
    result = { code: failed.code, stdout: failed.stdout, stderr: failed.stderr };
  }
  return { ...result, npx: existsSync(calls) ? readFileSync(calls, "utf8").trim().split("\n") : [] };
}

/** The 1-based line of the first line matching `pattern`. */
const lineOf = (/** @type {string} */ path, /** @type {RegExp} */ pattern) =>
  readFileSync(path, "utf8")
    .split("\n")
    .findIndex((line) => pattern.test(line)) + 1;

test("the placeholder database_id in [env.production] stops the deploy, naming the line and the id to paste there", async () => {
  const path = config("placeholder.toml", (text) => text.replace(/^SOURCES = \{\}$/m, "").concat(STRIPE_TABLE));
  const result = await deploy(["--skip-secrets", "--config", path]);
  assert.notEqual(result.code, 0);
  const line = lineOf(path, /^database_id = "0{8}-.*replace with/);
  assert.ok(line > 0);
  assert.match(
    result.stdout,
    new RegExp(
      `^FAIL\\s+${path.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}:${line}: \\[\\[env\\.production\\.d1_databases\\]\\] DB still has the placeholder database_id ${PLACEHOLDER}: paste the id npx wrangler d1 create webhook-receipts printed \\(or npx wrangler d1 list shows\\) there$`,
      "m",
    ),
  );
  assert.match(result.stderr, /npm run deploy stopped: .* failed \(nothing was deployed\)/);
  assert.deepEqual(result.npx, [], "wrangler was never run");
});

test("without --skip-secrets, every config problem is named before anything needs a login: the placeholder id and a missing binding, and no secret list", async () => {
  // No R2 block in [env.production]: the Worker would deploy without BODIES. And the database id still the placeholder.
  const path = config("unready.toml", (text) =>
    text
      .replace(/^\[\[env\.production\.r2_buckets\]\]\nbinding = "BODIES"\n.*\n/m, "")
      .replace(/^SOURCES = \{\}$/m, "")
      .concat(STRIPE_TABLE),
  );
  assert.doesNotMatch(readFileSync(path, "utf8"), /env\.production\.r2_buckets/);
  const result = await deploy(["--config", path]);
  assert.notEqual(result.code, 0);
  assert.match(
    result.stdout,
    new RegExp(
      `^FAIL\\s+\\S+:${lineOf(path, /^database_id = "0{8}-.*replace with/)}: .*placeholder database_id ${PLACEHOLDER}`,
      "m",
    ),
  );
  assert.match(
    result.stdout,
    /^FAIL\s+\[env\.production\] has no r2_buckets entry BODIES .*: add a \[\[env\.production\.r2_buckets\]\] table with binding = "BODIES"$/m,
  );
  assert.match(result.stderr, /check failed: 2 problems above \(the deployed Worker's secrets were not looked at/);
  assert.doesNotMatch(result.stdout + result.stderr, /could not list the Worker's secrets/);
  assert.deepEqual(result.npx, [], "neither wrangler secret list nor anything else that needs a login ran");
});

test("SOURCES = {} left next to a production source table stops the deploy, naming both lines and the fix", async () => {
  const path = config("redefined.toml", (text) => withRealId(text).concat(STRIPE_TABLE));
  const result = await deploy(["--skip-secrets", "--config", path]);
  assert.notEqual(result.code, 0);
  const emptied = lineOf(path, /^SOURCES = \{\}$/);
  const table = lineOf(path, /^\[env\.production\.vars\.SOURCES\.stripe-live\]$/);
  assert.match(
    result.stderr,
    new RegExp(
      `line ${table} \\(\\[env\\.production\\.vars\\.SOURCES\\.stripe-live\\]\\) defines a source, but line ${emptied} already set SOURCES = \\{\\}: delete line ${emptied}`,
    ),
  );
  assert.doesNotMatch(
    result.stderr,
    /^error: .*redefine an already defined table or value$/m,
    "not the bare TOML message",
  );
  assert.deepEqual(result.npx, []);
});

test("a config with its database id and its source tables reaches the dry run and then the deploy (here a stand-in)", async () => {
  const path = config("ready.toml", (text) =>
    withRealId(text)
      .replace(/^SOURCES = \{\}$/m, "")
      .concat(STRIPE_TABLE),
  );
  const result = await deploy(["--skip-secrets", "--config", path]);
  assert.equal(result.code, 0, result.stdout + result.stderr);
  assert.equal(result.npx.length, 2, result.npx.join("\n"));
  assert.match(
    result.npx[0],
    new RegExp(`^wrangler deploy --dry-run --env production --outdir \\S+ --config ${path}$`),
  );
  assert.equal(result.npx[1], `wrangler deploy --env production --config ${path}`);
});

test("check names the line of any TOML error it cannot read past", async () => {
  const path = config("broken.toml", (text) => `${text}\n[vars.SOURCES.broken\nprovider = "stripe"\n`);
  const result = await cli(["check", "--config-only", "--config", path]);
  assert.notEqual(result.code, 0);
  assert.match(
    result.stderr,
    new RegExp(
      `cannot be read: .* at line ${lineOf(path, /^\[vars\.SOURCES\.broken$/)}: \\[vars\\.SOURCES\\.broken$`,
      "m",
    ),
  );
});
