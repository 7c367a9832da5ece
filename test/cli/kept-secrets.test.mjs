/**
 * `kept list|approve|revoke` against a real receiver (`wrangler dev`): an Asana source's first handshake keeps its
 * secret, a second one waits as pending, and the CLI lists them by fingerprint, approves and revokes; `audit-log`
 * then lists those actions.
 */
import assert from "node:assert/strict";
import { createHash, createHmac, randomBytes } from "node:crypto";
import { rmSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import {
  cli,
  freePort,
  makeWorkDir,
  startReceiver,
  stopLeftoverCommands,
  testConfig,
  testDevVars,
  writeFile,
} from "./receiver.mjs";

const workDir = makeWorkDir();
const VERIFY_TOKEN = randomBytes(12).toString("hex");
/** @type {Awaited<ReturnType<typeof startReceiver>>} */
let receiver;
let project = /** @type {string[]} */ ([]);
let env = /** @type {Record<string, string>} */ ({});

before(async () => {
  const config = `${testConfig(await freePort())}\n[vars.SOURCES.cli-asana-kept]\nprovider = "asana"\nsecrets = ["CLI_ASANA_KEPT_VERIFY_TOKEN"]\ndestination = "none"\n`;
  const configPath = writeFile(workDir, "wrangler.toml", config);
  const envFile = writeFile(workDir, ".dev.vars", `${testDevVars()}CLI_ASANA_KEPT_VERIFY_TOKEN="${VERIFY_TOKEN}"\n`);
  receiver = await startReceiver({ configPath, envFile, workDir });
  project = ["--config", configPath, "--dev-vars", envFile];
  env = { RECEIVER_URL: receiver.url };
});

after(async () => {
  stopLeftoverCommands();
  await receiver?.stop();
  rmSync(workDir, { recursive: true, force: true });
});

const fingerprint = (/** @type {string} */ secret) => createHash("sha256").update(secret).digest("hex").slice(0, 16);

async function handshake(/** @type {string} */ secret, userAgent = "Asana-Webhooks/1.0") {
  const response = await fetch(`${receiver.url}/webhooks/cli-asana-kept?verify_token=${VERIFY_TOKEN}`, {
    method: "POST",
    headers: { "x-hook-secret": secret, "user-agent": userAgent },
  });
  assert.equal(response.status, 200);
}

async function deliveryStatus(/** @type {string} */ secret) {
  const body = JSON.stringify({
    events: [{ action: "changed", resource: { gid: randomBytes(6).toString("hex"), resource_type: "task" } }],
  });
  const signature = createHmac("sha256", secret).update(body).digest("hex");
  const response = await fetch(`${receiver.url}/webhooks/cli-asana-kept`, {
    method: "POST",
    body,
    headers: { "x-hook-signature": signature, "content-type": "application/json" },
  });
  await response.body?.cancel();
  return response.status;
}

describe("kept", () => {
  test("lists kept secrets by fingerprint only, approves a pending one and revokes the old one", async () => {
    const empty = await cli(["kept", "list", "cli-asana-kept", ...project], env);
    assert.equal(empty.code, 0, empty.stderr);
    assert.match(empty.stdout, /keeps no secret yet/);

    const original = `asana-${randomBytes(16).toString("hex")}`;
    const replacement = `asana-${randomBytes(16).toString("hex")}`;
    await handshake(original);
    await handshake(replacement, "curl/8.9.1");
    assert.equal(await deliveryStatus(replacement), 401);

    // Each line says when, from where and with which user agent the secret was last handed over.
    const listed = await cli(["kept", "list", "cli-asana-kept", ...project], env);
    assert.equal(listed.code, 0, listed.stderr);
    assert.match(listed.stdout, /^FINGERPRINT\s+STATUS\s+LAST HANDED OVER\s+FROM\s+USER AGENT$/m);
    assert.match(
      listed.stdout,
      new RegExp(`^${fingerprint(replacement)}\\s+pending\\s+\\d{4}-\\S+\\s+\\S+\\s+curl/8\\.9\\.1$`, "m"),
    );
    assert.match(
      listed.stdout,
      new RegExp(`^${fingerprint(original)}\\s+active\\s+\\d{4}-\\S+\\s+\\S+\\s+Asana-Webhooks/1\\.0$`, "m"),
    );
    assert.match(listed.stdout, /kept approve cli-asana-kept <fingerprint>/);
    assert.ok(
      !listed.stdout.includes(original) && !listed.stdout.includes(replacement),
      "a secret's value is never printed",
    );

    const approved = await cli(["kept", "approve", "cli-asana-kept", fingerprint(replacement), ...project], env);
    assert.equal(approved.code, 0, approved.stderr);
    assert.match(approved.stdout, new RegExp(`^approved ${fingerprint(replacement)} for cli-asana-kept`));
    assert.equal(await deliveryStatus(replacement), 200);

    const revoked = await cli(["kept", "revoke", "cli-asana-kept", fingerprint(original), ...project], env);
    assert.equal(revoked.code, 0, revoked.stderr);
    assert.match(revoked.stdout, new RegExp(`^revoked ${fingerprint(original)} for cli-asana-kept`));
    assert.equal(await deliveryStatus(original), 401);

    const json = await cli(["kept", "list", "cli-asana-kept", "--json", ...project], env);
    assert.deepEqual(
      JSON.parse(json.stdout).keptSecrets.map((/** @type {any} */ secret) => [secret.fingerprint, secret.status]),
      [[fingerprint(replacement), "active"]],
    );
  });

  test("an unknown fingerprint, a missing one, an unknown action and a source that keeps no secrets are one line each", async () => {
    const cases = [
      [["kept", "revoke", "cli-asana-kept", "0".repeat(16)], /keeps no secret with this fingerprint/],
      [["kept", "approve", "cli-asana-kept"], /needs the fingerprint/],
      [["kept", "forget", "cli-asana-kept"], /unknown action "forget"/],
      [["kept", "list", "demo"], /hands over no secret to keep/],
    ];
    for (const [args, pattern] of cases) {
      const result = await cli([.../** @type {string[]} */ (args), ...project], env);
      assert.notEqual(result.code, 0);
      assert.match(result.stderr.trim(), /** @type {RegExp} */ (pattern));
      assert.equal(result.stderr.trim().split("\n").length, 1, result.stderr);
    }
  });

  test("audit-log lists the approval and the revocation as the admin token's, and refuses a bad filter in one line", async () => {
    const listed = await cli(["audit-log", "--action", "approve", ...project], env);
    assert.equal(listed.code, 0, listed.stderr);
    assert.match(listed.stdout, /^WHEN\s+ACTOR\s+ROLE\s+VIA\s+ACTION\s+OUTCOME\s+AFFECTED\s+TARGET$/m);
    const rows = listed.stdout.trim().split("\n").slice(1);
    assert.equal(rows.length, 1, listed.stdout);
    assert.match(
      rows[0] ?? "",
      /^\d{4}-\S+\s+admin-token\s+admin\s+api\s+approve\s+allowed\s+1\s+source cli-asana-kept, kept secret [0-9a-f]{16}$/,
    );

    const json = await cli(["audit-log", "--action", "revoke", "--json", ...project], env);
    const revocations = JSON.parse(json.stdout).actions.map((/** @type {any} */ row) => [row.actor, row.affected]);
    // The revocation that changed something, and the one of an unknown fingerprint, which changed nothing.
    assert.deepEqual(revocations, [
      ["admin-token", 0],
      ["admin-token", 1],
    ]);

    const bad = await cli(["audit-log", "--outcome", "maybe", ...project], env);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr.trim(), /"outcome" must be allowed or refused/);
    assert.equal(bad.stderr.trim().split("\n").length, 1, bad.stderr);
  });
});
