/**
 * `issues`, `issues ack` and `issues resolve` against a real receiver (`wrangler dev`): a demo delivery the handler
 * refuses goes dead, the cron (GET /__scheduled) opens its issue, and the CLI lists, acknowledges and resolves it.
 */
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { after, before, test } from "node:test";
import { standardWebhookHeaders } from "../../scripts/lib/signed-delivery.mjs";
import {
  cli,
  freePort,
  makeWorkDir,
  startReceiver,
  stopLeftoverCommands,
  testConfig,
  testDevVars,
  WAIT,
  writeFile,
} from "./receiver.mjs";

const workDir = makeWorkDir();
const ISSUE = "dead-letters:demo:default";
/** @type {Awaited<ReturnType<typeof startReceiver>>} */
let receiver;
let project = /** @type {string[]} */ ([]);
let env = /** @type {Record<string, string>} */ ({});
let devVars = "";

before(async () => {
  const configPath = writeFile(workDir, "wrangler.toml", testConfig(await freePort()));
  devVars = testDevVars();
  const envFile = writeFile(workDir, ".dev.vars", devVars);
  receiver = await startReceiver({ configPath, envFile, workDir, testScheduled: true });
  project = ["--config", configPath, "--dev-vars", envFile];
  env = { RECEIVER_URL: receiver.url };
});

after(async () => {
  stopLeftoverCommands();
  await receiver?.stop();
  rmSync(workDir, { recursive: true, force: true });
});

const devVar = (/** @type {string} */ name) => new RegExp(`^${name}="([^"]*)"`, "m").exec(devVars)?.[1] ?? "";

/** @param {string} path */
async function admin(path) {
  const response = await fetch(`${receiver.url}/admin/api${path}`, {
    headers: { authorization: `Bearer ${devVar("ADMIN_TOKEN")}` },
  });
  return /** @type {any} */ (await response.json());
}

test("issues lists the dead letter's issue, ack needs a note and takes it, resolve resolves it", async () => {
  const body = JSON.stringify({ type: "account.credited", data: { account: "acct_cli", amount: "lots" } });
  const delivered = await fetch(`${receiver.url}/webhooks/demo`, {
    method: "POST",
    body,
    headers: standardWebhookHeaders(devVar("DEMO_WEBHOOK_SECRET"), `msg_cli_issue_${Date.now()}`, body),
  });
  assert.equal(delivered.status, 200);
  const { receipt } = /** @type {{ receipt: string }} */ (await delivered.json());
  const deadline = Date.now() + WAIT.output;
  for (;;) {
    if ((await admin(`/receipts/${receipt}`)).receipt?.status === "dead") break;
    assert.ok(Date.now() < deadline, `receipt ${receipt} never went dead:\n${receiver.log().slice(-2000)}`);
    await new Promise((done) => setTimeout(done, 250));
  }
  for (;;) {
    assert.equal((await fetch(`${receiver.url}/__scheduled?cron=*/5+*+*+*+*`)).status, 200);
    if ((await admin("/issues")).issues.some((/** @type {any} */ issue) => issue.issueKey === ISSUE)) break;
    assert.ok(Date.now() < deadline, `no issue after the cron:\n${receiver.log().slice(-2000)}`);
    await new Promise((done) => setTimeout(done, 500));
  }

  const listed = await cli(["issues", ...project], env);
  assert.equal(listed.code, 0, listed.stderr);
  assert.match(listed.stdout, new RegExp(`^${ISSUE}  open  warning  opened `, "m"));
  assert.match(listed.stdout, /^ {2}1 dead delivery on route default, waiting for an operator/m);

  const noNote = await cli(["issues", "ack", ISSUE, ...project], env);
  assert.notEqual(noNote.code, 0);
  assert.match(noNote.stderr, /issues ack needs --note/);

  const acked = await cli(["issues", "ack", ISSUE, "--note", "fixing the handler", ...project], env);
  assert.equal(acked.code, 0, acked.stderr);
  assert.equal(acked.stdout.trim(), `${ISSUE}: acknowledged`);
  const resolved = await cli(["issues", "resolve", ISSUE, ...project], env);
  assert.equal(resolved.code, 0, resolved.stderr);
  assert.equal(resolved.stdout.trim(), `${ISSUE}: resolved`);

  assert.match((await cli(["issues", ...project], env)).stdout, /^no open issues$/m);
  const all = await cli(["issues", "--all", "--json", ...project], env);
  const answer = JSON.parse(all.stdout);
  const issue = answer.issues.find((/** @type {any} */ entry) => entry.issueKey === ISSUE);
  assert.equal(issue.state, "resolved");
  assert.equal(issue.resolvedBy, "operator");
  assert.deepEqual(
    issue.history.map((/** @type {any} */ entry) => entry.event),
    ["opened", "acknowledged", "resolved"],
  );
});
