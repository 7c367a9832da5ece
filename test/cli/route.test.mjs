/**
 * `route test` and docs/routing.md: the docs' examples pasted into a config pass `check`, and `route test` runs
 * the Worker's own filter, schema and transform on a sample, sending and writing nothing. No receiver is started.
 */
import assert from "node:assert/strict";
import { readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { cli, makeWorkDir, ROOT, testConfig, testDevVars, writeFile } from "./receiver.mjs";

const workDir = makeWorkDir();
/** A destination on this machine: route test must never call it. */
const destinationRequests = /** @type {string[]} */ ([]);
const destination = createServer((request, response) => {
  destinationRequests.push(`${request.method} ${request.url}`);
  response.end();
});
let project = /** @type {string[]} */ ([]);

const docsBlocks = [...readFileSync(join(ROOT, "docs/routing.md"), "utf8").matchAll(/^```toml\n([\s\S]*?)^```$/gm)].map(
  (match) => match[1],
);

before(async () => {
  await new Promise((resolve) => destination.listen(0, "127.0.0.1", () => resolve(undefined)));
  const port = /** @type {import("node:net").AddressInfo} */ (destination.address()).port;
  const local = [
    "[vars.SOURCES.cli-route-local]",
    'provider = "standard-webhooks"',
    'secrets = ["DEMO_WEBHOOK_SECRET"]',
    'type_path = "type"',
    "[[vars.SOURCES.cli-route-local.routes]]",
    'name = "backend"',
    `destination = "http://127.0.0.1:${port}/hooks"`,
    'transform = \'{ "kind": $type, "who": data.account }\'',
    'headers = { "x-account" = "data.account" }',
    "[[vars.SOURCES.cli-route-local.routes]]",
    'name = "archive"',
    'destination = "none"',
    'filter = { type = "account.plan_changed" }',
  ].join("\n");
  const config = writeFile(workDir, "wrangler.toml", [testConfig(port), ...docsBlocks, local].join("\n\n"));
  project = ["--config", config, "--dev-vars", writeFile(workDir, ".dev.vars", testDevVars())];
});

after(() => {
  destination.close();
  rmSync(workDir, { recursive: true, force: true });
});

describe("docs/routing.md", () => {
  test("its examples, pasted into wrangler.toml, pass check", async () => {
    assert.ok(docsBlocks.length >= 3, "the doc's toml examples were not found");
    const result = await cli(["check", ...project]);
    assert.equal(result.code, 0, result.stdout + result.stderr);
    for (const name of [
      "demo-credits",
      "demo-slack",
      "demo-backend",
      "demo-checked",
      "demo-retries",
      "demo-ordered",
      "demo-ordered-ledger",
    ])
      assert.match(result.stdout, new RegExp(`valid sources \\(.*\\b${name}\\b`));
  });
});

describe("route test", () => {
  test("shows the filter's verdict, the transform's output and what the consumer would do", async () => {
    const small = await cli(["route", "test", "demo-slack", "credit", ...project]);
    assert.equal(small.code, 0, small.stdout + small.stderr);
    assert.match(
      small.stdout,
      /^source demo-slack · sample \S+credit\.json · type account\.credited · subject acct_0042$/m,
    );
    assert.match(small.stdout, /^ {2}filter {5}does not match$/m);
    assert.match(small.stdout, /"text": "Account acct_0042 was credited 100 credits"/);
    assert.match(small.stdout, /^ {2}verdict {4}skipped \(filtered out by route slack\)$/m);

    const bigFile = writeFile(
      workDir,
      "big.json",
      JSON.stringify({ type: "account.credited", data: { account: "acct_0007", amount: 1500 } }),
    );
    const big = await cli(["route", "test", "demo-slack", bigFile, "--json", ...project]);
    assert.equal(big.code, 0, big.stdout + big.stderr);
    const [answer] = JSON.parse(big.stdout).routes;
    assert.equal(answer.filterMatches, true);
    assert.deepEqual(answer.transform, {
      ok: true,
      output: { text: "Account acct_0007 was credited 1,500 credits", unfurl_links: false },
    });
    assert.equal(answer.verdict.kind, "deliver");
  });

  test("gives a schema's errors, and skips an event type the filter leaves out", async () => {
    const badFile = writeFile(
      workDir,
      "bad.json",
      JSON.stringify({ type: "account.credited", data: { account: "ACCT 1", amount: 1.5 } }),
    );
    const bad = await cli(["route", "test", "demo-checked", badFile, ...project]);
    assert.equal(bad.code, 0, bad.stdout + bad.stderr);
    assert.match(bad.stdout, /^ {2}schema {5}fails: #\/data\/account: .*pattern.*; #\/data\/amount: .*integer/m);
    assert.match(bad.stdout, /^ {2}verdict {4}dead-lettered: schema mismatch on route ledger: /m);

    const plan = await cli(["route", "test", "demo-credits", "plan-changed", ...project]);
    assert.match(plan.stdout, /^ {2}filter {5}does not match$/m);
    assert.match(plan.stdout, /^ {2}transform {2}none \(the original bytes are sent\)$/m);
  });

  test("sends nothing to the route's destination", async () => {
    const result = await cli(["route", "test", "cli-route-local", "credit", ...project]);
    assert.equal(result.code, 0, result.stdout + result.stderr);
    assert.match(result.stdout, /^ {2}headers {4}x-account: acct_0042$/m);
    assert.match(result.stdout, /^ {2}verdict {4}forwarded: the transform's output$/m);
    assert.match(result.stdout, /^nothing was sent or written$/m);
    assert.deepEqual(destinationRequests, []);
  });

  test("runs every route of the source, or the one --route names", async () => {
    const every = await cli(["route", "test", "cli-route-local", "plan-changed", ...project]);
    assert.equal(every.code, 0, every.stdout + every.stderr);
    assert.match(every.stdout, /^route backend → http:\/\/127\.0\.0\.1:\d+\/hooks$/m);
    assert.match(every.stdout, /^route archive → none\n {2}filter {5}matches$/m);
    assert.match(every.stdout, /^ {2}verdict {4}skipped: the route has no destination$/m);

    const one = await cli([
      "route",
      "test",
      "cli-route-local",
      "plan-changed",
      "--route",
      "archive",
      "--json",
      ...project,
    ]);
    assert.equal(one.code, 0, one.stdout + one.stderr);
    assert.deepEqual(
      JSON.parse(one.stdout).routes.map((/** @type {{ name: string }} */ route) => route.name),
      ["archive"],
    );
    const none = await cli(["route", "test", "cli-route-local", "credit", "--route", "archiv", ...project]);
    assert.equal(none.code, 3);
    assert.match(
      none.stderr,
      /^error: source cli-route-local has no route "archiv": its routes are backend, archive$/m,
    );
  });

  test("names a broken route's problem, as check does, and fails", async () => {
    const broken = writeFile(
      workDir,
      "broken.toml",
      `${readFileSync(project[1], "utf8")}\n\n[vars.SOURCES.cli-route-broken]\nprovider = "standard-webhooks"\nsecrets = ["DEMO_WEBHOOK_SECRET"]\n[[vars.SOURCES.cli-route-broken.routes]]\nname = "r"\ndestination = "none"\nfilter = { type = { "$where" = "1" } }\n`,
    );
    const result = await cli([
      "route",
      "test",
      "cli-route-broken",
      "credit",
      "--config",
      broken,
      "--dev-vars",
      project[3],
    ]);
    assert.equal(result.code, 1);
    assert.match(result.stdout, /^FAIL\s+SOURCES\.cli-route-broken route r: filter: unsupported operator \$where$/m);
    assert.match(result.stderr, /^error: source cli-route-broken is out of service/m);
  });
});
