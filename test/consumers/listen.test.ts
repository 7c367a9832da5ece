import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { processReceipt } from "../../src/consumers/receipts/process";
import worker from "../../src/index";
import type { HubMessage } from "../../src/listen/protocol";
import type { QueuedWork } from "../../src/model/work-message";
import { parsed, problemsOf } from "../support/source-tables";
import { attemptRows, receiptRow, seedReceipt } from "./support/processing";

/**
 * A `listen:<name>` route (docs/cli.md, "`listen <source> [--route R] --forward URL`"): the consumer's attempt goes to
 * the name's ListenHub, which pushes it over the WebSocket the admin API upgraded, and records the listener's
 * answer as a forward's. With nobody listening the attempt retries and the hub lists the delivery as waiting.
 */

const LISTEN_URL = "https://receiver.test/admin/api/listen/listen-laptop";

async function openListener(): Promise<{ socket: WebSocket; messages: HubMessage[] }> {
  const response = await exports.default.fetch(
    new Request(LISTEN_URL, { headers: { upgrade: "websocket", authorization: `Bearer ${env.ADMIN_TOKEN}` } }),
  );
  expect(response.status).toBe(101);
  const socket = response.webSocket!;
  const messages: HubMessage[] = [];
  socket.accept();
  socket.addEventListener("message", (event) => {
    const message = JSON.parse(String(event.data)) as HubMessage;
    messages.push(message);
    // The CLI's part: the local server answered 201 in 12 ms.
    if (message.type === "delivery")
      socket.send(JSON.stringify({ type: "result", attempt: message.attempt, status: 201, latencyMs: 12 }));
  });
  return { socket, messages };
}

async function until(check: () => boolean): Promise<void> {
  for (let tries = 0; !check(); tries++) {
    if (tries > 200) throw new Error("the hub said nothing");
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe("a listen: route", () => {
  it("waits while nobody listens, is listed to the listener that connects, then is delivered signed and transformed", async () => {
    const receiptId = await seedReceipt({
      source: "listen-laptop",
      payload: { type: "account.credited", data: { account: "acct_7" } },
      eventType: "account.credited",
    });
    const t0 = Date.now();
    expect(await processReceipt(env, receiptId, t0)).toMatchObject({ kind: "retry" });
    const waited = await receiptRow(receiptId);
    expect(waited.status).toBe("pending");
    expect(waited.lastError).toMatch(/^nobody is listening on listen:laptop-test/);

    const { socket, messages } = await openListener();
    await until(() => messages.length > 0);
    expect(messages[0]).toMatchObject({
      type: "connected",
      listen: "laptop-test",
      source: "listen-laptop",
      route: "laptop",
      waitingCount: 1,
      waiting: [{ deliveryId: receiptId, source: "listen-laptop", eventType: "account.credited" }],
    });

    expect(await processReceipt(env, receiptId, waited.nextAttemptAt!)).toEqual({ kind: "done", status: "processed" });
    const delivery = messages.find((message) => message.type === "delivery");
    if (delivery?.type !== "delivery") throw new Error("no delivery reached the listener");
    const body = atob(delivery.body);
    expect(JSON.parse(body)).toEqual({ kind: "account.credited", who: "acct_7" });
    expect(delivery.headers["webhook-id"]).toBe(receiptId);
    expect(delivery.headers["idempotency-key"]).toBe(receiptId);
    // Signed as a forward is: the local server verifies it under the gateway secret.
    expect(() => new Webhook(env.GATEWAY_SIGNING_SECRET).verify(body, delivery.headers)).not.toThrow();
    expect((await attemptRows(receiptId)).map(({ outcome, httpStatus }) => ({ outcome, httpStatus }))).toEqual([
      { outcome: "retry", httpStatus: null },
      { outcome: "processed", httpStatus: 201 },
    ]);
    socket.close(1000, "done");
  });

  it("drops a waiting delivery from the list once it died, and keeps listing one still retrying", async () => {
    const seed = () =>
      seedReceipt({
        source: "listen-laptop",
        payload: { type: "account.credited", data: { account: "acct_8" } },
        eventType: "account.credited",
      });
    const [dying, retrying] = [await seed(), await seed()];
    // Its retries spent: this attempt, turned away with nobody listening, is its last.
    await env.DB.prepare("UPDATE receipts SET attempts = 100 WHERE id = ?").bind(dying).run();
    expect(await processReceipt(env, dying)).toEqual({ kind: "done", status: "dead" });
    expect(await processReceipt(env, retrying)).toMatchObject({ kind: "retry" });
    expect((await receiptRow(dying)).status).toBe("dead");

    const { socket, messages } = await openListener();
    await until(() => messages.length > 0);
    const connected = messages[0];
    if (connected?.type !== "connected") throw new Error("the hub did not greet the listener");
    const listed = connected.waiting.map((entry) => entry.deliveryId);
    expect(listed).toContain(retrying);
    expect(listed).not.toContain(dying);
    socket.close(1000, "done");
  });

  it("drops a waiting delivery from the list once the dead-letter queue gave up on it", async () => {
    const receiptId = await seedReceipt({
      source: "listen-laptop",
      payload: { type: "account.credited", data: { account: "acct_9" } },
      eventType: "account.credited",
    });
    expect(await processReceipt(env, receiptId)).toMatchObject({ kind: "retry" });
    const before = await openListener();
    await until(() => before.messages.length > 0);
    expect(before.messages[0]).toMatchObject({
      type: "connected",
      waiting: expect.arrayContaining([expect.objectContaining({ deliveryId: receiptId })]),
    });
    before.socket.close(1000, "done");
    // The work queue gave up on its message: the dead-letter queue's consumer marks it dead.
    const batch = createMessageBatch<QueuedWork>("webhook-work-dead", [
      {
        id: `dead_${receiptId}`,
        timestamp: Date.now(),
        attempts: 3,
        body: { source: "listen-laptop", receiptIds: [receiptId] },
      },
    ]);
    const ctx = createExecutionContext();
    await worker.queue(batch, env, ctx);
    expect((await getQueueResult(batch, ctx)).explicitAcks).toEqual([`dead_${receiptId}`]);
    expect((await receiptRow(receiptId)).status).toBe("dead");

    const { socket, messages } = await openListener();
    await until(() => messages.length > 0);
    const connected = messages[0];
    if (connected?.type !== "connected") throw new Error("the hub did not greet the listener");
    expect(connected.waiting.map((entry) => entry.deliveryId)).not.toContain(receiptId);
    socket.close(1000, "done");
  });

  it("refuses a listener without the admin token", async () => {
    const response = await exports.default.fetch(new Request(LISTEN_URL, { headers: { upgrade: "websocket" } }));
    expect(response.status).toBe(401);
    expect(response.webSocket).toBeNull();
  });

  it("answers which route a listener would reach, without an upgrade", async () => {
    const response = await exports.default.fetch(
      new Request(LISTEN_URL, { headers: { authorization: `Bearer ${env.ADMIN_TOKEN}` } }),
    );
    expect(await response.json()).toEqual({ source: "listen-laptop", route: "laptop", listen: "laptop-test" });
  });
});

describe("listen: destinations in config", () => {
  it("takes listen:<name>, with the source's forward timeout, and refuses a name that is not one", () => {
    expect(parsed({ destination: "listen:laptop", forward_timeout: "20s" }).destination).toEqual({
      kind: "listen",
      listenName: "laptop",
      timeoutMs: 20_000,
    });
    expect(problemsOf({ destination: "listen:no spaces" })).toEqual([
      expect.stringMatching(/destination "listen:no spaces": a listen name must match/),
    ]);
  });
});
