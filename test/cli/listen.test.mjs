/**
 * `listen` end to end: the CLI against a real `wrangler dev`, a local server as the target, and the connection cut in
 * the middle by a proxy between them. Every event the route takes reaches the local server, signed as a forward is;
 * the one its filter drops never does; what arrived while nobody listened is listed on reconnecting and then
 * delivered; and no delivery has its processed outcome recorded twice.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { rmSync } from "node:fs";
import { createServer } from "node:http";
import { connect, createServer as createTcpServer } from "node:net";
import { after, before, test } from "node:test";
import { Webhook } from "standardwebhooks";
import {
  cli,
  cliProcess,
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
const devVars = testDevVars();
const devVar = (/** @type {string} */ name) => new RegExp(`^${name}="([^"]+)"$`, "m").exec(devVars)?.[1] ?? "";
const senderSecret = new Webhook(devVar("DEMO_WEBHOOK_SECRET"));
const gateway = new Webhook(devVar("GATEWAY_SIGNING_SECRET"));

/** The local server: every delivery it took, by webhook-id, each checked against the gateway signature. */
const received = /** @type {{ webhookId: string, type: string, verified: boolean }[]} */ ([]);
const target = createServer((request, response) => {
  const chunks = /** @type {Buffer[]} */ ([]);
  request.on("data", (chunk) => chunks.push(chunk));
  request.on("end", () => {
    const body = Buffer.concat(chunks).toString("utf8");
    const header = (/** @type {string} */ name) => String(request.headers[name] ?? "");
    let verified = true;
    try {
      gateway.verify(body, {
        "webhook-id": header("webhook-id"),
        "webhook-timestamp": header("webhook-timestamp"),
        "webhook-signature": header("webhook-signature"),
      });
    } catch {
      verified = false;
    }
    received.push({ webhookId: header("webhook-id"), type: JSON.parse(body).type, verified });
    response.writeHead(verified ? 200 : 401).end();
  });
});

/** A TCP proxy between the CLI and the receiver, so the test can cut the connection and refuse new ones for a while. */
const open = new Set(/** @type {import("node:net").Socket[]} */ ([]));
let refusing = false;
let receiverPort = 0;
const proxy = createTcpServer((client) => {
  if (refusing) return client.destroy();
  const upstream = connect(receiverPort, "127.0.0.1");
  for (const socket of [client, upstream]) {
    open.add(socket);
    socket.on("close", () => open.delete(socket));
    socket.on("error", () => {});
  }
  client.pipe(upstream).pipe(client);
});
function cut() {
  refusing = true;
  for (const socket of open) socket.destroy();
}

/** @type {Awaited<ReturnType<typeof startReceiver>>} */
let receiver;
let proxyUrl = "";
let targetUrl = "";

before(async () => {
  await new Promise((done) => target.listen(0, "127.0.0.1", () => done(undefined)));
  targetUrl = `http://127.0.0.1:${/** @type {import("node:net").AddressInfo} */ (target.address()).port}/hooks`;
  const listening = [
    "[vars.SOURCES.cli-listen]",
    'provider = "standard-webhooks"',
    'secrets = ["DEMO_WEBHOOK_SECRET"]',
    'type_path = "type"',
    // Short waits, so what waited while nobody listened comes back within the test.
    "retry = { base_delay_seconds = 1, max_delay_seconds = 2, max_retries = 500, jitter = 0 }",
    "[[vars.SOURCES.cli-listen.routes]]",
    'name = "laptop"',
    'destination = "listen:laptop"',
    'filter = { type = { "$in" = ["account.credited"] } }',
  ].join("\n");
  const config = writeFile(workDir, "wrangler.toml", `${testConfig(await freePort())}\n${listening}\n`);
  receiver = await startReceiver({ configPath: config, envFile: writeFile(workDir, ".dev.vars", devVars), workDir });
  receiverPort = Number(new URL(receiver.url).port);
  const proxyPort = await freePort();
  await new Promise((done) => proxy.listen(proxyPort, "127.0.0.1", () => done(undefined)));
  proxyUrl = `http://127.0.0.1:${proxyPort}`;
});

after(async () => {
  stopLeftoverCommands();
  cut();
  proxy.close();
  target.close();
  await receiver?.stop();
  rmSync(workDir, { recursive: true, force: true });
});

/** Posts one event to the receiver directly (not through the proxy); answers its receipt id. */
async function sendEvent(/** @type {string} */ type, /** @type {number} */ n) {
  const eventId = `evt_${randomUUID()}`;
  const body = JSON.stringify({ type, data: { account: "acct_1", n } });
  const at = new Date();
  const response = await fetch(`${receiver.url}/webhooks/cli-listen`, {
    method: "POST",
    body,
    headers: {
      "content-type": "application/json",
      "webhook-id": eventId,
      "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
      "webhook-signature": senderSecret.sign(eventId, at, body),
    },
  });
  assert.equal(response.status, 200, await response.clone().text());
  return /** @type {{ receipt: string }} */ (await response.json()).receipt;
}

/** The receipt's detail from the admin API; an empty one until the relay has written it to D1. */
async function receipt(/** @type {string} */ receiptId) {
  const response = await fetch(`${receiver.url}/admin/api/receipts/${receiptId}`, {
    headers: { authorization: `Bearer ${devVar("ADMIN_TOKEN")}` },
  });
  if (response.status === 404) return { receipt: { status: "not yet relayed" }, attempts: [] };
  assert.equal(response.status, 200);
  return /** @type {any} */ (await response.json());
}

async function until(
  /** @type {() => Promise<boolean> | boolean} */ done,
  /** @type {string} */ what,
  /** @type {() => Promise<string>} */ state = async () => "",
) {
  const deadline = Date.now() + WAIT.output;
  while (!(await done())) {
    if (Date.now() > deadline) assert.fail(`${what}: not within ${WAIT.output} ms\n${await state()}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

test("listen delivers every event across a dropped connection, each processed outcome recorded once", async () => {
  const env = { RECEIVER_DEV_VARS: `${workDir}/.dev.vars`, RECEIVER_URL: proxyUrl };
  const listener = cliProcess(["listen", "cli-listen", "--forward", targetUrl], env);
  // "nothing waiting" follows the connected line in a later write: wait for it rather than race it.
  await listener.waitFor(/connected: listening on listen:laptop\n {2}nothing waiting/);
  assert.match(listener.output(), /connecting to .*\n.*connected: listening on listen:laptop\n {2}nothing waiting/);

  const before = [await sendEvent("account.credited", 1), await sendEvent("account.credited", 2)];
  const filtered = await sendEvent("account.ignored", 3);
  await until(() => received.length >= 2, "the first two events at the local server");
  await listener.waitFor(
    /account\.credited \S+ {2}→ 200 in \d+ ms[^\n]*\n[^\n]*account\.credited \S+ {2}→ 200 in \d+ ms/,
  );

  cut();
  await listener.waitFor(/disconnected \([^)]*\); reconnecting in/);
  const whileAway = [
    await sendEvent("account.credited", 4),
    await sendEvent("account.credited", 5),
    await sendEvent("account.credited", 6),
  ];
  // Each has been tried and turned away: nobody listened.
  for (const receiptId of whileAway)
    await until(
      async () =>
        (await receipt(receiptId)).attempts.some((/** @type {any} */ a) => /nobody is listening/.test(a.error)),
      `receipt ${receiptId} tried while nobody listened`,
    );
  refusing = false;
  await listener.waitFor(/connected: listening on listen:laptop\n {2}3 waiting from while nobody listened/);

  const all = [...before, ...whileAway];
  for (const receiptId of all)
    await until(
      async () => (await receipt(receiptId)).receipt.status === "processed",
      `${receiptId} processed`,
      async () => `${JSON.stringify(await receipt(receiptId))}\n${listener.output()}\n${receiver.log().slice(-3000)}`,
    );
  for (const receiptId of all) {
    const detail = await receipt(receiptId);
    const processed = detail.attempts.filter((/** @type {any} */ a) => a.outcome === "processed");
    assert.equal(processed.length, 1, `${receiptId}: ${JSON.stringify(detail.attempts)}`);
    assert.ok(
      received.some((delivery) => delivery.webhookId === receiptId && delivery.verified),
      receiptId,
    );
  }
  // Its shard relays on its own alarm, which a busy machine may run after the others' events are processed.
  await until(
    async () => (await receipt(filtered)).receipt.status === "skipped",
    `${filtered} skipped by the route's filter`,
    async () => JSON.stringify(await receipt(filtered)),
  );
  assert.ok(received.every((delivery) => delivery.type === "account.credited" && delivery.verified));
  assert.equal(await listener.interrupt(), 0);
  assert.match(listener.output(), /stopped\n$/);
});

test("listen ends with one line when it cannot listen: a refused token, an unknown source, a route that is not listen:", async () => {
  const env = { RECEIVER_DEV_VARS: `${workDir}/.dev.vars`, RECEIVER_URL: receiver.url };
  const forward = ["--forward", targetUrl];
  const refused = await cli(["listen", "cli-listen", ...forward], { ...env, ADMIN_TOKEN: "not-the-receivers-token" });
  assert.equal(refused.code, 4, refused.stdout + refused.stderr);
  assert.match(refused.stderr, /^error: the admin API refused the token/m);
  const unknown = await cli(["listen", "no-such-source", ...forward], env);
  assert.equal(unknown.code, 3, unknown.stdout + unknown.stderr);
  assert.match(unknown.stderr, /^error: No webhook source is configured under this name\.$/m);
  const notListen = await cli(["listen", "cli-forward", ...forward], env);
  assert.equal(notListen.code, 1, notListen.stdout + notListen.stderr);
  assert.match(notListen.stderr, /^error: Source cli-forward has no route whose destination is listen:<name>/m);
  const noTarget = await cli(["listen", "cli-listen"], env);
  assert.equal(noTarget.code, 2, noTarget.stdout + noTarget.stderr);
  assert.match(noTarget.stderr, /^error: --forward <url> is required/m);
});
