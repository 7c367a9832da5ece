/**
 * `route test <source> --last N [--config draft.toml]` against a real receiver (`wrangler dev`): events sent and
 * delivered for real, then run again through the routes as the receiver has them and as a draft has them. The
 * routes' destination counts what it is sent: the tests never add to it.
 */
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { createServer } from "node:http";
import { after, before, describe, test } from "node:test";
import { cli, makeWorkDir, startReceiver, testConfig, testDevVars, WAIT, writeFile } from "./receiver.mjs";

const workDir = makeWorkDir();
/** @type {Awaited<ReturnType<typeof startReceiver>>} */
let receiver;
const destinationRequests = /** @type {string[]} */ ([]);
const destination = createServer((request, response) => {
  destinationRequests.push(`${request.method} ${request.url}`);
  request.resume();
  request.on("end", () => response.writeHead(204).end());
});
let port = 0;
let devVarsArgs = /** @type {string[]} */ ([]);
let env = /** @type {Record<string, string>} */ ({});

/** The source as the receiver runs it, or (`draft`) with ledger's transform changed and checked taken out. */
function trialSource(draft = false) {
  const ledger = [
    "[[vars.SOURCES.cli-trial.routes]]",
    'name = "ledger"',
    `destination = "http://127.0.0.1:${port}/ledger"`,
    'filter = { type = "account.credited" }',
    draft
      ? 'transform = \'{ "account": data.account, "credits": data.amount * 10 }\''
      : 'transform = \'{ "account": data.account, "amount": data.amount }\'',
  ];
  const checked = [
    "[[vars.SOURCES.cli-trial.routes]]",
    'name = "checked"',
    `destination = "http://127.0.0.1:${port}/checked"`,
    'schema = { type = "object", properties = { data = { type = "object", properties = { amount = { type = "integer" } } } } }',
  ];
  return [
    "[vars.SOURCES.cli-trial]",
    'provider = "standard-webhooks"',
    'secrets = ["DEMO_WEBHOOK_SECRET"]',
    'type_path = "type"',
    ...ledger,
    ...(draft ? [] : checked),
  ].join("\n");
}

before(async () => {
  await new Promise((resolve) => destination.listen(0, "127.0.0.1", () => resolve(undefined)));
  port = /** @type {import("node:net").AddressInfo} */ (destination.address()).port;
  const configPath = writeFile(workDir, "wrangler.toml", `${testConfig(port)}\n\n${trialSource()}\n`);
  const envFile = writeFile(workDir, ".dev.vars", testDevVars());
  receiver = await startReceiver({ configPath, envFile, workDir });
  devVarsArgs = ["--dev-vars", envFile];
  env = { RECEIVER_URL: receiver.url };
  const half = writeFile(
    workDir,
    "half.json",
    JSON.stringify({ type: "account.credited", data: { account: "acct_half", amount: 1.5 } }),
  );
  for (const sample of ["credit", half, "plan-changed"]) {
    const sent = await cli(["send", "cli-trial", sample, "--config", configPath, ...devVarsArgs], env);
    assert.equal(sent.code, 0, sent.stdout + sent.stderr);
  }
  // Delivered for real: ledger takes the credit and the half, checked the credit and the plan change (the half
  // fails its schema and dies).
  const deadline = Date.now() + WAIT.output;
  while (destinationRequests.length < 4) {
    if (Date.now() > deadline) throw new Error(`only ${destinationRequests.join(", ")} were delivered`);
    await new Promise((done) => setTimeout(done, 250));
  }
});

after(async () => {
  await receiver?.stop();
  destination.close();
  rmSync(workDir, { recursive: true, force: true });
});

describe("route test --last", () => {
  test("counts per route what the stored events would do, as the receiver runs the routes now", async () => {
    const result = await cli(["route", "test", "cli-trial", "--last", "10", ...devVarsArgs], env);
    assert.equal(result.code, 0, result.stdout + result.stderr);
    assert.match(
      result.stdout,
      /^source cli-trial · the newest 10 stored events · routes as the receiver runs them now$/m,
    );
    assert.match(result.stdout, /^read 3 · evaluated 3 · body past retention 0 \(counted, not evaluated\)$/m);
    assert.match(
      result.stdout,
      /^route ledger → http:\/\/127\.0\.0\.1:\d+\/ledger\n {2}match {6}2\n {2}skipped {4}1\n {13}1 × filtered out by route ledger\n {2}would die {2}0$/m,
    );
    assert.match(
      result.stdout,
      /^route checked → http:\/\/127\.0\.0\.1:\d+\/checked\n {2}match {6}2\n {2}skipped {4}0\n {2}would die {2}1\n {13}1 × schema mismatch on route checked: #\/data\/amount: /m,
    );
    assert.match(result.stdout, /^nothing was sent or written$/m);
    assert.equal(destinationRequests.length, 4);
  });

  test("with a draft config, counts its routes beside now's and diffs the changed outputs", async () => {
    const draft = writeFile(workDir, "draft.toml", `${testConfig(port)}\n\n${trialSource(true)}\n`);
    const result = await cli(["route", "test", "cli-trial", "--last", "10", "--config", draft, ...devVarsArgs], env);
    assert.equal(result.code, 0, result.stdout + result.stderr);
    assert.match(result.stdout, /· routes as in \S+draft\.toml$/m);
    assert.match(result.stdout, /^route ledger → \S+\n {2}match {6}2 {2}\(now 2\)$/m);
    assert.match(result.stdout, /^route checked: only in the config now \(2 match, 0 skipped, 1 would die\)$/m);
    assert.match(result.stdout, /^changed events: 3$/m);
    assert.match(result.stdout, /^ {4}- {3}"amount": 100\n {4}\+ {3}"credits": 1000$/m);

    const json = await cli(
      ["route", "test", "cli-trial", "--last", "10", "--route", "ledger", "--config", draft, "--json", ...devVarsArgs],
      env,
    );
    assert.equal(json.code, 0, json.stdout + json.stderr);
    const report = JSON.parse(json.stdout);
    assert.equal(report.config, "draft");
    assert.deepEqual(
      report.routes.map((/** @type {{ route: string }} */ tally) => tally.route),
      ["ledger"],
    );
    assert.equal(report.changes.events, 2);
    assert.deepEqual(
      report.changes.listed.map((/** @type {{ draft: { output: unknown } }} */ change) => change.draft.output),
      [
        { account: "acct_half", credits: 15 },
        { account: "acct_0042", credits: 1000 },
      ],
    );
    assert.equal(destinationRequests.length, 4);
  });

  test("refuses more than 1000 events, and a draft the Worker would refuse, each in one line", async () => {
    const tooMany = await cli(["route", "test", "cli-trial", "--last", "1001", ...devVarsArgs], env);
    assert.equal(tooMany.code, 2);
    assert.match(tooMany.stderr, /^error: "last" must be a whole number from 1 to 1000 /m);
    const broken = writeFile(
      workDir,
      "broken.toml",
      `${testConfig(port)}\n\n${trialSource(true).replace("data.amount * 10", "data.amount *")}\n`,
    );
    const refused = await cli(["route", "test", "cli-trial", "--last", "10", "--config", broken, ...devVarsArgs], env);
    assert.equal(refused.code, 1);
    assert.match(
      refused.stdout,
      /^FAIL\s+SOURCES\.cli-trial route ledger: transform is not a valid JSONata expression/m,
    );
    assert.equal(destinationRequests.length, 4);
  });
});
