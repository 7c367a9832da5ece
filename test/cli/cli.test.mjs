/**
 * The CLI against a real receiver: `wrangler dev` with its own state, one source per provider, and the CLI run as
 * a user runs it (a child process reading the config and .dev.vars). `npm run test:cli`.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { chmodSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import {
  cli,
  cliProcess,
  freePort,
  makeWorkDir,
  PROVIDER_SOURCES,
  ROOT,
  startReceiver,
  stopLeftoverCommands,
  testConfig,
  testDevVars,
  WAIT,
  writeFile,
} from "./receiver.mjs";

const workDir = makeWorkDir();
/** @type {Awaited<ReturnType<typeof startReceiver>>} */
let receiver;
let echoPort = 0;
/** Every command below reads this test's config and secrets, and talks to its receiver. */
let project = /** @type {string[]} */ ([]);
/** A trailing slash on RECEIVER_URL must not matter. */
let env = /** @type {Record<string, string>} */ ({});
let adminToken = "";

/** Straight from the admin API, not through the CLI: the receipt recorded for a source's event key, once relayed. */
async function recordedReceipt(/** @type {string} */ source, /** @type {string} */ eventKey) {
  const deadline = Date.now() + WAIT.output;
  for (;;) {
    const response = await fetch(`${receiver.url}/admin/api/sources/${source}/events/${encodeURIComponent(eventKey)}`, {
      headers: { authorization: `Bearer ${adminToken}` },
    });
    if (response.ok)
      return /** @type {{ receipt: { source: string, eventKey: string } }} */ (await response.json()).receipt;
    if (Date.now() > deadline) throw new Error(`${source} ${eventKey} was never recorded (${response.status})`);
    await new Promise((done) => setTimeout(done, 250));
  }
}

before(async () => {
  echoPort = await freePort();
  // One source with a named route, so that a route exists that demo (its one route is `default`) lacks.
  const routed =
    '\n[vars.SOURCES.cli-routed]\nprovider = "standard-webhooks"\nsecrets = ["DEMO_WEBHOOK_SECRET"]\n[[vars.SOURCES.cli-routed.routes]]\nname = "ledger"\ndestination = "none"\n';
  const configPath = writeFile(workDir, "wrangler.toml", testConfig(echoPort) + routed);
  const devVars = testDevVars();
  adminToken = /^ADMIN_TOKEN="(.*)"$/m.exec(devVars)?.[1] ?? "";
  const envFile = writeFile(workDir, ".dev.vars", devVars);
  receiver = await startReceiver({ configPath, envFile, workDir });
  project = ["--config", configPath, "--dev-vars", envFile];
  env = { RECEIVER_URL: `${receiver.url}/` };
});

after(async () => {
  stopLeftoverCommands();
  await receiver?.stop();
  rmSync(workDir, { recursive: true, force: true });
});

/** One line, no stack trace: what a person sees when something is wrong. */
function assertOneLineError(
  /** @type {{ code: number, stdout: string, stderr: string }} */ result,
  /** @type {RegExp} */ pattern,
) {
  assert.notEqual(result.code, 0);
  assert.match(result.stderr.trim(), pattern);
  assert.equal(result.stderr.trim().split("\n").length, 1, `more than one line:\n${result.stderr}`);
  assert.doesNotMatch(result.stderr, /^\s+at /m);
}

/** Polls `show` until the receipt is in D1 (the relay moves it there shortly after the 200) and finished. */
async function showWhenFinished(/** @type {string[]} */ args, statuses = /processed|skipped|dead|stale/) {
  const deadline = Date.now() + WAIT.output;
  for (;;) {
    const result = await cli(["show", ...args, ...project], env);
    if (result.code === 0 && new RegExp(`^status\\s+(${statuses.source})`, "m").test(result.stdout))
      return result.stdout;
    if (Date.now() > deadline)
      throw new Error(
        `never finished: ${args.join(" ")}\n${result.stdout}${result.stderr}\n${receiver.log().slice(-2000)}`,
      );
    await new Promise((done) => setTimeout(done, 300));
  }
}

const acceptedReceipt = (/** @type {string} */ stdout) => {
  const match = /^200 (\{.*\})$/m.exec(stdout);
  assert.ok(match, `no 200 answer in:\n${stdout}`);
  const answer = JSON.parse(match[1]);
  assert.equal(answer.status, "accepted", stdout);
  return /** @type {string} */ (answer.receipt);
};

/** The provider names the receiver verifies (src/providers/registry.ts), bundled the way `check` bundles the registry. */
async function receiverProviderNames() {
  const { build } = await import("esbuild");
  const result = await build({
    stdin: {
      contents: 'export { knownProviderNames } from "./src/providers/registry.ts";',
      resolveDir: ROOT,
      loader: "ts",
    },
    bundle: true,
    write: false,
    format: "esm",
    platform: "node",
    logLevel: "silent",
  });
  const registry = await import(
    `data:text/javascript;base64,${Buffer.from(result.outputFiles[0].text).toString("base64")}`
  );
  return /** @type {Set<string>} */ (registry.knownProviderNames());
}

/**
 * Providers whose deliveries only the sender itself can sign: the receiver fetches their key from the sender's
 * pinned hosts. `send` says so precisely, and how to try one instead.
 */
const SIGNED_BY_FETCHED_KEYS = /** @type {Record<string, RegExp>} */ ({
  "aws-sns":
    /^error: aws-sns messages are signed by Amazon's own certificate, which the receiver fetches from https:\/\/sns\.<region>\.amazonaws\.com .*only AWS can sign/,
  plaid:
    /^error: plaid deliveries are signed by Plaid's own key, which the receiver fetches from https:\/\/sandbox\.plaid\.com\/webhook_verification_key\/get .*only Plaid can sign/,
});

describe("send", () => {
  test("the test config has a source for every provider name the receiver verifies", async () => {
    const covered = new Set(PROVIDER_SOURCES.map((source) => source.provider));
    assert.deepEqual(
      [...(await receiverProviderNames())].filter((provider) => !covered.has(provider)),
      [],
    );
  });

  test("signs every provider's bundled sample with the source's scheme and secret; the receiver accepts each", async () => {
    const sources = [
      "demo",
      ...PROVIDER_SOURCES.filter((source) => !(source.provider in SIGNED_BY_FETCHED_KEYS)).map((source) => source.name),
    ];
    // Each source twice: a second send is a new event too, also where the sender's signature does not cover its
    // id (GitHub, Shopify, …) and the receiver dedupes by the signed content. Two sources at a time: the machine is
    // shared (the first sends read the config with wrangler's reader; the rest find it kept, scripts/cli/config-cache.mjs).
    const results = [];
    for (let index = 0; index < sources.length; index += 2) {
      results.push(
        ...(await Promise.all(
          sources.slice(index, index + 2).map(async (source) => {
            const first = await cli(["send", source, ...project], env);
            return { source, sends: [first, await cli(["send", source, ...project], env)] };
          }),
        )),
      );
    }
    for (const { source, sends } of results) {
      const eventKeys = [];
      for (const result of sends) {
        assert.equal(result.code, 0, `${source}: ${result.stdout}${result.stderr}`);
        // Most answer {"status":"accepted"}; Discord, Twilio, Adyen and Graph senders get an answer in their own format.
        const answer = /^(20[02]) (.*)$/m.exec(result.stdout);
        assert.ok(answer, `${source}: ${result.stdout}`);
        if (answer[2].startsWith('{"status"'))
          assert.equal(JSON.parse(answer[2]).status, "accepted", `${source}: ${result.stdout}`);
        assert.doesNotMatch(result.stdout, /duplicate/, `${source}: ${result.stdout}`);
        const eventKey = new RegExp(`follow it: npm run cli -- show ${source} (\\S+)$`, "m").exec(result.stdout)?.[1];
        assert.ok(eventKey, `${source}: no event key in\n${result.stdout}`);
        eventKeys.push(eventKey);
      }
      assert.notEqual(eventKeys[0], eventKeys[1], `${source}: the second send reused the first one's key`);
      // Verified, claimed and recorded under the source and the key the CLI announced, both times.
      for (const eventKey of eventKeys)
        assert.deepEqual(
          await recordedReceipt(source, eventKey).then(({ source, eventKey }) => ({ source, eventKey })),
          { source, eventKey },
        );
    }
  });

  test("a provider whose key only the sender holds is one line saying why, not an unknown provider", async () => {
    for (const source of PROVIDER_SOURCES.filter((source) => source.provider in SIGNED_BY_FETCHED_KEYS)) {
      const result = await cli(["send", source.name, ...project], env);
      assertOneLineError(result, SIGNED_BY_FETCHED_KEYS[source.provider]);
      assert.doesNotMatch(result.stderr, /no signer|known providers/);
    }
  });

  test("--id sets the event key: the same id twice is a duplicate with the same receipt, and show finds it by key", async () => {
    const id = `evt_cli_${Date.now()}`;
    const first = await cli(["send", "cli-stripe", "--id", id, ...project], env);
    const receipt = acceptedReceipt(first.stdout);
    const second = await cli(["send", "cli-stripe", "--id", id, ...project], env);
    assert.equal(second.code, 0, second.stderr);
    assert.match(second.stdout, new RegExp(`^200 \\{"status":"duplicate","receipt":"${receipt}"\\}$`, "m"));
    // Said in words, with the first receipt to follow: the key just sent names no receipt of its own.
    assert.match(
      second.stdout,
      new RegExp(
        `^duplicate of receipt ${receipt}: the receiver already holds this event .* · follow it: npm run cli -- show ${receipt}$`,
        "m",
      ),
    );
    assert.doesNotMatch(second.stdout, /follow it: npm run cli -- show cli-stripe/);
    // A sender answered in its own format (Twilio's TwiML) is read from the x-webhook-* headers the same way.
    const twilioId = randomUUID();
    await cli(["send", "cli-twilio", "--id", twilioId, ...project], env);
    const twilioAgain = await cli(["send", "cli-twilio", "--id", twilioId, ...project], env);
    assert.match(twilioAgain.stdout, /^200 <\?xml/m);
    assert.match(twilioAgain.stdout, /^duplicate of receipt (\w{26}): .* follow it: npm run cli -- show \1$/m);
    const shown = await showWhenFinished(["cli-stripe", id]);
    assert.match(shown, new RegExp(`^receipt\\s+${receipt}$`, "m"));
    assert.match(shown, /type payment_intent\.succeeded/);
    assert.match(shown, /received and acknowledged/);
  });

  test("a file and a named example are sent as given: the demo's credit is processed by its handler", async () => {
    const sent = await cli(["send", "demo", "credit", ...project], env);
    const receipt = acceptedReceipt(sent.stdout);
    const shown = await showWhenFinished([receipt]);
    assert.match(shown, /^status\s+processed/m);
    assert.match(shown, /attempt 1: processed/);
    assert.match(shown, /^outcome\s+processed: applied once/m);
    assert.doesNotMatch(shown, /"amount"/, "the body is printed only with --body");
    const withBody = await cli(["show", receipt, "--body", ...project], env);
    assert.match(withBody.stdout, /"account": "acct_0042"/);
  });

  test("a wrong secret is refused by the receiver, and the CLI says what to do in one line", async () => {
    const wrongVars = writeFile(workDir, "wrong.vars", `${testDevVars()}CLI_GITHUB_SECRET="not-the-secret"\n`);
    const result = await cli(["send", "cli-github", "--config", project[1], "--dev-vars", wrongVars], env);
    assert.equal(result.code, 1);
    assert.match(result.stdout, /^401 /m);
    assertOneLineError(result, /refused the signature: .*CLI_GITHUB_SECRET.*Restart npm start/);
  });

  test("an unknown source, a missing sample and a missing private key are one line each", async () => {
    assertOneLineError(
      await cli(["send", "nope", ...project], env),
      /^error: no source nope in the config: sources are demo, cli-svix/,
    );
    assertOneLineError(
      await cli(["send", "demo", "no-such-sample", ...project], env),
      /^error: no file or sample named no-such-sample: samples are .*stripe.*, credit, plan-changed$/,
    );
    const noPrivate = writeFile(
      workDir,
      "no-private.vars",
      testDevVars().replace(/^CLI_DISCORD_SECRET_PRIVATE_KEY=.*$/m, ""),
    );
    assertOneLineError(
      await cli(["send", "cli-discord", "--config", project[1], "--dev-vars", noPrivate], env),
      /add CLI_DISCORD_SECRET_PRIVATE_KEY to .*secret ed25519 CLI_DISCORD_SECRET/,
    );
  });
});

describe("tail, show, replay", () => {
  test("tail follows a new receipt through its attempt, filtered by source, and stops cleanly on Ctrl-C", async () => {
    const tail = cliProcess(["tail", "--source", "demo", "--interval", "300", "--history", "0", ...project], env);
    await tail.waitFor(/following http:\/\/127\.0\.0\.1:\d+ · source demo/);
    const receipt = acceptedReceipt((await cli(["send", "demo", ...project], env)).stdout);
    await cli(["send", "cli-github", ...project], env);
    await tail.waitFor(new RegExp(`demo  ${receipt}  attempt 1 processed`));
    assert.match(
      tail.output(),
      new RegExp(`demo  ${receipt}  account\\.credited  key msg_\\w+  (pending|processing|processed)`),
    );
    assert.doesNotMatch(tail.output(), /cli-github/, "--source demo shows only demo");
    assert.equal(await tail.interrupt(), 0);
  });

  test("an idle tail backs off: a dozen seconds with nothing new is a handful of requests, and news still shows", async () => {
    // A counting proxy in front of the receiver: every request tail makes is one line in the dev server's log.
    const requests = /** @type {string[]} */ ([]);
    const proxy = createServer(async (request, response) => {
      requests.push(`${request.method} ${request.url}`);
      const upstream = await fetch(`${receiver.url}${request.url}`, {
        method: request.method,
        headers: /** @type {Record<string, string>} */ (request.headers),
      });
      response.writeHead(upstream.status, {
        "content-type": upstream.headers.get("content-type") ?? "application/json",
      });
      response.end(Buffer.from(await upstream.arrayBuffer()));
    });
    await new Promise((done) => proxy.listen(0, "127.0.0.1", () => done(undefined)));
    const proxyUrl = `http://127.0.0.1:${/** @type {import("node:net").AddressInfo} */ (proxy.address()).port}`;
    try {
      // Stripe: the event id is in the signed body, so every send is a new receipt (an unsigned key would not be).
      const tail = cliProcess(["tail", "--source", "cli-stripe", "--history", "0", ...project], {
        RECEIVER_URL: proxyUrl,
      });
      await tail.waitFor(/following .* source cli-stripe/);
      const before = requests.length;
      await new Promise((done) => setTimeout(done, 12_000));
      const idle = requests.slice(before).filter((line) => line.startsWith("GET /admin/api/receipts"));
      assert.ok(idle.length <= 6, `${idle.length} requests in 12 s of nothing new:\n${idle.join("\n")}`);
      const sent = await cli(["send", "cli-stripe", ...project], env);
      const eventKey = /follow it: npm run cli -- show cli-stripe (\S+)$/m.exec(sent.stdout)?.[1];
      await tail.waitFor(new RegExp(`cli-stripe  \\S+  payment_intent\\.succeeded  key ${eventKey}`));
      assert.equal(await tail.interrupt(), 0);
    } finally {
      await new Promise((done) => proxy.close(done));
    }
  });

  test("tail --source shows duplicate deliveries, which keep no receipt of their own", async () => {
    const tail = cliProcess(["tail", "--source", "cli-paddle", "--interval", "300", "--history", "0", ...project], env);
    await tail.waitFor(/following .* source cli-paddle/);
    const id = `evt_dup_${Date.now()}`;
    acceptedReceipt((await cli(["send", "cli-paddle", "--id", id, ...project], env)).stdout);
    for (let copy = 0; copy < 2; copy++)
      assert.match((await cli(["send", "cli-paddle", "--id", id, ...project], env)).stdout, /"status":"duplicate"/);
    // Each look at the tally prints what arrived since the last one: one line of 2, or two of 1.
    const shown = () =>
      [
        ...tail
          .output()
          .matchAll(
            /cli-paddle {2}(\d+) duplicate deliver(?:y|ies) \(answered with the first receipt; a duplicate stores nothing\)/g,
          ),
      ].reduce((sum, match) => sum + Number(match[1]), 0);
    const deadline = Date.now() + WAIT.output;
    while (shown() < 2 && Date.now() < deadline) await new Promise((done) => setTimeout(done, 250));
    assert.equal(shown(), 2, tail.output());
    assert.equal(await tail.interrupt(), 0);
  });

  test("tail --status dead shows dead letters only", async () => {
    const tail = cliProcess(["tail", "--status", "dead", "--interval", "300", "--history", "0", ...project], env);
    await tail.waitFor(/following .* status dead/);
    const broken = writeFile(
      workDir,
      "broken.json",
      JSON.stringify({ type: "account.credited", data: { account: "acct_0042", amount: "lots" } }),
    );
    const receipt = acceptedReceipt((await cli(["send", "demo", broken, ...project], env)).stdout);
    await tail.waitFor(new RegExp(`${receipt}.*dead`));
    assert.doesNotMatch(tail.output(), /account\.credited {2}key \S+ {2}processed/);
    assert.equal(await tail.interrupt(), 0);
  });

  test("tail shows a replay of an older receipt that is no longer among the newest it reads", async () => {
    const older = acceptedReceipt((await cli(["send", "cli-slack", ...project], env)).stdout);
    await showWhenFinished([older]);
    const newer = acceptedReceipt((await cli(["send", "cli-slack", ...project], env)).stdout);
    await showWhenFinished([newer]);
    // --page 1: each look reads only the newest receipt, so the older one can only come from the changes query.
    const tail = cliProcess(
      [
        "tail",
        "--source",
        "cli-slack",
        "--page",
        "1",
        "--interval",
        "300",
        "--history",
        "0",
        "--window",
        "1h",
        ...project,
      ],
      env,
    );
    await tail.waitFor(/following .* source cli-slack/);
    assert.equal((await cli(["replay", older, ...project], env)).code, 0);
    await tail.waitFor(new RegExp(`cli-slack  ${older}  replayed \\(was skipped\\)`));
    await tail.waitFor(new RegExp(`cli-slack  ${older}  attempt \\d+ skipped`));
    assert.match(tail.output(), new RegExp(`cli-slack  ${older}  .*\\(received earlier, changed now\\)`));
    assert.doesNotMatch(
      tail.output(),
      new RegExp(newer),
      "the newer receipt did not change: history 0 shows nothing of it",
    );
    assert.equal(await tail.interrupt(), 0);
  });

  test("replay one receipt, then every dead letter of a source; a receipt id that does not exist is one line", async () => {
    // This test's receipts only, for the replay job's sample (the receiver's clock is this machine's).
    const testStart = new Date(Date.now() - 1000).toISOString();
    const broken = writeFile(
      workDir,
      "broken-replay.json",
      JSON.stringify({ type: "account.credited", data: { account: "acct_0042", amount: "lots" } }),
    );
    const receipt = acceptedReceipt((await cli(["send", "demo", broken, ...project], env)).stdout);
    const dead = await showWhenFinished([receipt], /dead/);
    assert.match(dead, /^outcome\s+dead: .*data\.amount must be an integer.*replay /m);

    const one = await cli(["replay", receipt, ...project], env);
    assert.equal(one.code, 0, one.stderr);
    assert.match(one.stdout, new RegExp(`^replayed ${receipt}: back to pending`, "m"));
    const replayed = await showWhenFinished([receipt], /dead/);
    assert.match(replayed, /attempt 2: dead/);
    // A second replay: the receipt's own counter restarts with each replay, the header counts every attempt listed.
    assert.equal((await cli(["replay", receipt, ...project], env)).code, 0);
    const deadline = Date.now() + WAIT.output;
    let twice = "";
    while (!/attempt 3: dead/.test(twice) && Date.now() < deadline) {
      await new Promise((done) => setTimeout(done, 300));
      twice = (await cli(["show", receipt, ...project], env)).stdout;
    }
    assert.match(twice, /attempt 3: dead/);
    assert.match(twice, /^status\s+dead\s+provenance live\s+attempts 3 \(1 since the last replay\)$/m);

    const bulk = await cli(
      ["replay", "--dead", "--source", "demo", "--since", new Date(Date.now() - 3_600_000).toISOString(), ...project],
      env,
    );
    assert.equal(bulk.code, 0, bulk.stderr);
    assert.match(bulk.stdout, /^replayed [1-9]\d* dead letters? of demo since /m);
    assert.match(bulk.stdout, new RegExp(`^  ${receipt}$`, "m"));

    // --route: only that route's dead letters (demo's one route is named default); a route it lacks is one line.
    await showWhenFinished([receipt], /dead/);
    const byRoute = await cli(
      [
        "replay",
        "--dead",
        "--source",
        "demo",
        "--route",
        "default",
        "--since",
        new Date(Date.now() - 3_600_000).toISOString(),
        ...project,
      ],
      env,
    );
    assert.equal(byRoute.code, 0, byRoute.stderr);
    assert.match(byRoute.stdout, /^replayed [1-9]\d* dead letters? of demo route default since /m);
    assert.match(byRoute.stdout, new RegExp(`^  ${receipt}$`, "m"));
    assertOneLineError(
      await cli(["replay", "--dead", "--source", "demo", "--route", "nosuch", ...project], env),
      /^error: Source "demo" has no route "nosuch" \(its routes: default\)\.$/,
    );

    // By filter as one job: a dry run counts and samples and replays nothing; the job replays; its key shows it.
    await showWhenFinished([receipt], /dead/);
    const dry = await cli(["replay", "--source", "demo", "--since", testStart, "--dry-run", ...project], env);
    assert.equal(dry.code, 0, dry.stderr);
    assert.match(dry.stdout, /^would replay [1-9]\d* dead deliveries of demo \(dry run: nothing replayed\)$/m);
    assert.match(dry.stdout, new RegExp(`^  ${receipt}  \\(its own route\\)  receipt$`, "m"));
    const job = await cli(["replay", "--source", "demo", "--since", testStart, ...project], env);
    assert.equal(job.code, 0, job.stderr);
    const jobKey = /^replay job (\S+) done: replayed [1-9]\d* of demo /m.exec(job.stdout)?.[1];
    assert.ok(jobKey, job.stdout);
    const progress = await cli(["replay", "--job", jobKey, ...project], env);
    assert.equal(progress.code, 0, progress.stderr);
    assert.match(progress.stdout, new RegExp(`^replay job ${jobKey} done: replayed [1-9]`, "m"));

    // Dismissed by an operator: the timeline says when, and how to undo it.
    await showWhenFinished([receipt], /dead/);
    const dismissed = await cli(["dismiss", receipt, ...project], env);
    assert.equal(dismissed.code, 0, dismissed.stderr);
    assert.match(dismissed.stdout, new RegExp(`^dismissed 1 of 1\n  ${receipt}$`, "m"));
    const afterDismiss = await cli(["show", receipt, ...project], env);
    assert.match(afterDismiss.stdout, /^status\s+dismissed/m);
    assert.match(
      afterDismiss.stdout,
      new RegExp(
        `^ {2}\\S+Z {2}dismissed by an operator: out of the dead letters \\(restore: npm run cli -- restore ${receipt}, or the dashboard's dead letters\\)$`,
        "m",
      ),
    );
    // Asked again: nothing moves, the receipt is named apart, and the exit code says not all was done.
    const again = await cli(["dismiss", receipt, ...project], env);
    assert.equal(again.code, 1);
    assert.match(
      again.stdout,
      new RegExp(`^dismissed 0 of 1\nnot dismissed, not dead \\(or unknown\\):\n  ${receipt}$`, "m"),
    );
    // More ids than one API call takes, by a route only another source has: the call holding the demo receipt is
    // refused whole (its source lacks the route), the other call still answers, and the command reports both.
    const unknownIds = Array.from({ length: 100 }, (_, index) => `01KB${String(index).padStart(22, "0")}`);
    const mixed = await cli(["restore", ...unknownIds, receipt, "--route", "ledger", "--json", ...project], env);
    assert.equal(mixed.code, 1, mixed.stderr);
    const mixedReport = JSON.parse(mixed.stdout);
    assert.deepEqual(mixedReport.changed, []);
    assert.deepEqual([...mixedReport.unchanged].sort(), unknownIds);
    assert.deepEqual(mixedReport.routeNotFound, [receipt]);
    // A route no source has: one line, exit 3 (not found), and nothing moves (the restore below still finds it dismissed).
    const noRoute = await cli(["restore", receipt, "--route", "nosuch", ...project], env);
    assertOneLineError(noRoute, /^error: .*route "nosuch"/);
    assert.equal(noRoute.code, 3);
    // Restored: the timeline keeps the dismissal (without the hint to undo it) and adds the restore after it.
    const restored = await cli(["restore", receipt, "--json", ...project], env);
    assert.equal(restored.code, 0, restored.stderr);
    assert.deepEqual(JSON.parse(restored.stdout), { changed: [receipt], unchanged: [] });
    const afterRestore = (await cli(["show", receipt, ...project], env)).stdout;
    assert.match(afterRestore, /^status\s+dead/m);
    assert.match(
      afterRestore,
      /^ {2}\S+Z {2}dismissed by an operator: out of the dead letters\n {2}\S+Z {2}restored by an operator: a dead letter again, replayable$/m,
    );

    assertOneLineError(
      await cli(["replay", "01KB0000000000000000000000", ...project], env),
      /^error: No receipt has this id\.$/,
    );
    assertOneLineError(await cli(["replay", "--dead", ...project], env), /needs --source/);
  });

  test("show by an unknown event key and by a malformed id: one line each", async () => {
    assertOneLineError(
      await cli(["show", "demo", "msg_never_sent", ...project], env),
      /^error: No receipt for this event key/,
    );
    assertOneLineError(await cli(["show", "not-a-receipt", ...project], env), /is not a receipt id/);
  });
});

describe("echo", () => {
  test("prints each forwarded delivery with its verified gateway signature, and refuses a forged one", async () => {
    const echo = cliProcess(["echo", "--port", String(echoPort), ...project], env);
    await echo.waitFor(/echo backend on http:\/\/127\.0\.0\.1:\d+/);
    const receipt = acceptedReceipt((await cli(["send", "cli-forward", ...project], env)).stdout);
    await echo.waitFor(new RegExp(`receipt ${receipt}  source cli-forward`)).catch(async (error) => {
      const shown = await cli(["show", receipt, ...project], env);
      throw new Error(
        `${error.message}\nthe receipt:\n${shown.stdout}${shown.stderr}\nreceiver log:\n${receiver.log().slice(-3000)}`,
      );
    });
    assert.match(echo.output(), /POST \/hooks {2}signature ok → 200/);
    // The body's lines follow the receipt's line and may reach this process in a later chunk: wait for them.
    await echo.waitFor(/"title": "Webhook retries arrive twice"/);
    const shown = await showWhenFinished([receipt]);
    assert.match(shown, /attempt 1: processed HTTP 200/);

    const forged = await fetch(`http://127.0.0.1:${echoPort}/hooks`, {
      method: "POST",
      body: "{}",
      headers: {
        "webhook-id": "msg_forged",
        "webhook-timestamp": String(Math.floor(Date.now() / 1000)),
        "webhook-signature": "v1,AAAA",
      },
    });
    assert.equal(forged.status, 401);
    await echo.waitFor(/signature REJECTED .* → 401/);
    assert.equal(await echo.interrupt(), 0);
  });

  test("a port in use is one line", async () => {
    const echo = cliProcess(["echo", "--port", String(echoPort), ...project], env);
    await echo.waitFor(/echo backend on/);
    const second = await cli(["echo", "--port", String(echoPort), ...project], env);
    assert.equal(await echo.interrupt(), 0);
    assertOneLineError(second, new RegExp(`port ${echoPort} is in use: pass --port`));
  });
});

describe("check", () => {
  test("passes for the test config and its .dev.vars, naming every secret it found", async () => {
    const result = await cli(["check", ...project]);
    assert.equal(result.code, 0, result.stdout + result.stderr);
    assert.match(result.stdout, new RegExp(`^ok\\s+.*: ${PROVIDER_SOURCES.length + 3} valid sources`, "m"));
    assert.match(result.stdout, /^ok\s+CLI_SENDGRID_SECRET \(source cli-sendgrid\)$/m);
    assert.match(result.stdout, /^ok\s+GATEWAY_SIGNING_SECRET \(source cli-forward \(forwards\)\)$/m);
    assert.match(result.stdout, /^check passed$/m);
  });

  test("fails on a missing secret and on a config the Worker would refuse, saying which and what to do", async () => {
    const missing = writeFile(workDir, "missing.vars", testDevVars().replace(/^CLI_PADDLE_SECRET=.*$/m, ""));
    const noSecret = await cli(["check", "--config", project[1], "--dev-vars", missing]);
    assert.equal(noSecret.code, 1);
    assert.match(
      noSecret.stdout,
      /^FAIL\s+CLI_PADDLE_SECRET \(source cli-paddle\) is not in .*missing\.vars: add CLI_PADDLE_SECRET="…" to /m,
    );

    // An admin token long enough but guessable by shape is refused as the Worker refuses it.
    const repetitive = writeFile(
      workDir,
      "repetitive.vars",
      testDevVars().replace(/^ADMIN_TOKEN=.*$/m, `ADMIN_TOKEN="${"ab".repeat(16)}"`),
    );
    const weakToken = await cli(["check", "--config", project[1], "--dev-vars", repetitive]);
    assert.equal(weakToken.code, 1);
    assert.match(
      weakToken.stdout,
      /^FAIL\s+ADMIN_TOKEN in .*repetitive\.vars repeats too few characters to be hard to guess .*secret token makes one\)$/m,
    );

    const badConfig = writeFile(
      workDir,
      "bad.toml",
      `${testConfig(echoPort)}\n[vars.SOURCES.cli-bad]\nprovider = "carrier-pigeon"\nsecrets = ["X"]\n`,
    );
    const invalid = await cli(["check", "--config", badConfig, "--dev-vars", project[3]]);
    assert.equal(invalid.code, 1);
    assert.match(invalid.stdout, /^FAIL\s+SOURCES\.cli-bad: unsupported provider "carrier-pigeon"$/m);

    const typo = writeFile(
      workDir,
      "typo.toml",
      `${testConfig(echoPort)}\n[vars.SOURCES.cli-typo]\nprovider = "stirpe"\nsecrets = ["X"]\n`,
    );
    const suggested = await cli(["check", "--config-only", "--config", typo]);
    assert.match(
      suggested.stdout,
      /^FAIL\s+SOURCES\.cli-typo: unsupported provider "stirpe" \(did you mean "stripe"\?\)$/m,
    );
    assert.match(invalid.stderr, /^check failed: \d+ problems? above$/m);
  });
});

describe("check --remote", () => {
  test("reads the Worker's secret names from wrangler secret list, and names each missing one with the command that sets it", async () => {
    // A stand-in for `npx wrangler secret list --format json` (the real one needs a Cloudflare account): it
    // prints a banner, then the JSON wrangler prints, and records the arguments it was given.
    const bin = join(workDir, "fake-bin");
    mkdirSync(bin, { recursive: true });
    const listed = JSON.stringify([
      { name: "ADMIN_TOKEN", type: "secret_text" },
      { name: "STRIPE_LIVE_SECRET", type: "secret_text" },
    ]);
    writeFile(bin, "npx", `#!/bin/sh\necho "$@" > "${join(bin, "args")}"\necho " wrangler"\necho '${listed}'\n`);
    chmodSync(join(bin, "npx"), 0o755);
    const config = writeFile(
      workDir,
      "remote.toml",
      [
        'name = "remote-check"',
        `main = ${JSON.stringify(join(ROOT, "src/index.ts"))}`,
        'compatibility_date = "2026-11-01"',
        "[env.production.vars.SOURCES.stripe-live]",
        'provider = "stripe"',
        'secrets = ["STRIPE_LIVE_SECRET"]',
        "[env.production.vars.SOURCES.slack]",
        'provider = "slack"',
        'secrets = ["SLACK_SIGNING_SECRET"]',
        "",
      ].join("\n"),
    );
    const result = await cli(["check", "--remote", "--env", "production", "--config", config], {
      PATH: `${bin}:${process.env.PATH}`,
    });
    assert.equal(result.code, 1, result.stdout + result.stderr);
    assert.match(
      readFileSync(join(bin, "args"), "utf8"),
      /^wrangler secret list --format json --config \S+remote\.toml --env production$/m,
    );
    assert.match(result.stdout, /^ok\s+STRIPE_LIVE_SECRET \(source stripe-live\)$/m);
    assert.match(
      result.stdout,
      /^FAIL\s+SLACK_SIGNING_SECRET \(source slack\) is not in the deployed Worker's secrets: npx wrangler secret put SLACK_SIGNING_SECRET --env production$/m,
    );
  });

  test("an environment the config does not have is one line naming it", async () => {
    assertOneLineError(
      await cli(["check", "--env", "staging", "--config-only"]),
      /cannot be read: No environment found in configuration with name "staging"/,
    );
  });
});

describe("the production config", () => {
  test("ships no demo source, and its one problem on config alone is the database id still to paste", async () => {
    const result = await cli(["check", "--env", "production", "--config-only"]);
    assert.equal(result.code, 1, result.stdout + result.stderr);
    assert.doesNotMatch(result.stdout, /demo/);
    assert.match(
      result.stdout,
      /^warn\s+wrangler\.toml \[env\.production\] declares no source yet: .*\[env\.production\.vars\.SOURCES\.<name>\]/m,
    );
    assert.deepEqual(result.stdout.match(/^FAIL.*$/gm), [
      "FAIL  wrangler.toml:" +
        (readFileSync(join(ROOT, "wrangler.toml"), "utf8")
          .split("\n")
          .findIndex((line) => /^database_id = "0{8}.*replace with/.test(line)) +
          1) +
        ": [[env.production.d1_databases]] DB still has the placeholder database_id 00000000-0000-0000-0000-000000000000: paste the id npx wrangler d1 create webhook-receipts printed (or npx wrangler d1 list shows) there",
    ]);
  });
});

describe("failures anyone hits first", () => {
  test("no receiver running: one line saying to run npm start, for send, show, replay and tail", async () => {
    const down = { RECEIVER_URL: `http://127.0.0.1:${await freePort()}/` };
    for (const args of [
      ["send", "demo"],
      ["show", "01KB0000000000000000000000"],
      ["replay", "01KB0000000000000000000000"],
      ["tail"],
    ]) {
      assertOneLineError(
        await cli([...args, ...project], down),
        /^error: no receiver at http:\/\/127\.0\.0\.1:\d+: run npm start/,
      );
    }
  });

  test("exit codes mean the same in every command: 2 a wrong command line, 3 nothing by that name, 4 no setup", async () => {
    const down = { RECEIVER_URL: `http://127.0.0.1:${await freePort()}/` };
    for (const [args, where, code] of /** @type {[string[], Record<string, string>, number][]} */ ([
      [["show", "not-a-receipt"], env, 2],
      [["tail", "--status", "bogus"], env, 2],
      [["send", "demo", "--no-such-option"], env, 2],
      [["show", "01KB0000000000000000000000"], env, 3],
      [["show", "demo", "msg_never_sent"], env, 3],
      [["replay", "01KB0000000000000000000000"], env, 3],
      [["send", "nope"], env, 3],
      [["send", "demo", "no-such-sample"], env, 3],
      [["send", "demo"], down, 4],
      [["show", "01KB0000000000000000000000"], down, 4],
      [["tail"], down, 4],
    ])) {
      const result = await cli([...args, ...project], where);
      assert.equal(result.code, code, `${args.join(" ")}: ${result.stderr}`);
    }
    assert.equal(
      (await cli(["send", "demo", "--dev-vars", `${workDir}/absent.vars`, "--config", project[1]], env)).code,
      4,
    );
  });

  test("no .dev.vars yet: one line saying npm start creates it", async () => {
    assertOneLineError(
      await cli(["send", "demo", "--config", project[1], "--dev-vars", `${workDir}/absent.vars`], env),
      /no .*absent\.vars yet: run npm start once/,
    );
  });

  test("secret gateway makes a Standard Webhooks secret: whsec_ and base64 of 32 random bytes, new each time", async () => {
    const first = (await cli(["secret", "gateway"])).stdout.trim();
    const second = (await cli(["secret", "gateway"])).stdout.trim();
    assert.match(first, /^whsec_[A-Za-z0-9+/]{43}=$/);
    assert.equal(Buffer.from(first.slice("whsec_".length), "base64").length, 32);
    assert.notEqual(first, second);
  });
});
