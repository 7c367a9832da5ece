import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { ATTEMPTS_IN_FLIGHT } from "../../src/consumers/attempt/slice-budget";
import worker from "../../src/index";
import { type QueuedWork, receiptIdsOf, routeNamedBy } from "../../src/model/work-message";
import { recordingQueue, type SentWork } from "../routing/follow-on-support";
import { deliveryRow, keysOf, lane } from "../routing/gate-support";
import { seedFurtherDelivery, seedReceipt } from "./support/processing";

/**
 * One consumer invocation runs a batch's receipts and its further-delivery messages alongside each other
 * (src/consumers/queue/queue.ts), and a Worker keeps at most ATTEMPTS_IN_FLIGHT outgoing connections open: the two
 * share that budget (src/consumers/attempt/attempt-slots.ts, ConnectionSlots), never six each. Both kinds go to one
 * slow lane of the forward stand-in, which records how many of the lane's requests were open as each arrived.
 */

/**
 * One consumer invocation of one batch: `count` receipts of `receiptSource` (first delivery, as the relay sends them)
 * and `count` further deliveries of `furtherSource`'s route `further`, one message each. Returns the delivery ids
 * (as the destination's Idempotency-Key) and the ids of the messages the invocation acked.
 */
async function receiptsBesideFurther(receiptSource: string, furtherSource: string, count: number) {
  const receipts: string[] = [];
  const further: string[] = [];
  for (let index = 0; index < count; index += 1) {
    const payload = { type: "account.credited", data: { amount: index } };
    receipts.push(await seedReceipt({ source: receiptSource, payload }));
    further.push(await seedFurtherDelivery({ source: furtherSource, payload, ownRoute: "plain", route: "further" }));
  }
  const messages: Array<{ id: string; body: QueuedWork }> = [
    {
      id: `msg_connections_receipts_${receipts[0]}`,
      body: { source: receiptSource, database: "DB", receiptIds: receipts, relayGrant: true },
    },
    {
      id: `msg_connections_further_${further[0]}`,
      body: { source: furtherSource, database: "DB", receiptIds: further, route: "further" },
    },
  ];
  const batch = createMessageBatch<QueuedWork>(
    "webhook-work",
    messages.map((message) => ({ ...message, timestamp: new Date(), attempts: 1 })),
  );
  const ctx = createExecutionContext();
  await worker.queue(batch, env, ctx);
  const result = await getQueueResult(batch, ctx);
  expect(result.explicitAcks.sort()).toEqual(messages.map((message) => message.id).sort());
  return { further, deliveryIds: [...receipts, ...further.map((receiptId) => `${receiptId}:further`)] };
}

/** What arrived in `laneName` for these delivery ids. */
async function requestsFor(laneName: string, deliveryIds: readonly string[]) {
  const mine = new Set(deliveryIds);
  return (await lane(laneName)).filter((request) => mine.has(request.headers["idempotency-key"]!));
}

describe("a batch of receipts and further deliveries in one invocation", () => {
  it("never holds more than ATTEMPTS_IN_FLIGHT connections open in all, and delivers each once", {
    timeout: 120_000,
  }, async () => {
    const { further, deliveryIds } = await receiptsBesideFurther("connections-one", "connections-two", 6);
    const requests = await requestsFor("shared-connections", deliveryIds);
    expect(keysOf(requests).sort()).toEqual([...deliveryIds].sort());
    // Six each would have let twelve be open at once: the slow lane keeps every one open 1.5 s.
    expect(Math.max(...requests.map((request) => request.openOnArrival))).toBeLessThanOrEqual(ATTEMPTS_IN_FLIGHT);
    for (const receiptId of further)
      expect(await deliveryRow(receiptId, "further"), receiptId).toMatchObject({ status: "processed", attempts: 1 });
  });

  it("sends the receipts' and the further deliveries' attempts alongside each other, not one message after the other", {
    timeout: 120_000,
  }, async () => {
    // Three of each to a lane that answers once six are open at once: only both kinds together can open six.
    const { deliveryIds } = await receiptsBesideFurther("overlap-one", "overlap-two", 3);
    const requests = await requestsFor("overlap", deliveryIds);
    expect(keysOf(requests).sort()).toEqual([...deliveryIds].sort());
    expect(Math.max(...requests.map((request) => request.openOnArrival))).toBe(6);
  });
});

describe("an event's first attempt fanned out to eight routes", () => {
  it("opens at most ATTEMPTS_IN_FLIGHT connections, and sends the routes past them on messages of their own", {
    timeout: 120_000,
  }, async () => {
    const source = "connections-fan";
    const routes = Array.from({ length: 8 }, (_, index) => `r${index}`);
    const receipts = [
      await seedReceipt({ source, payload: { type: "account.credited", data: { amount: 1 } } }),
      await seedReceipt({ source, payload: { type: "account.credited", data: { amount: 2 } } }),
    ];
    const id = `msg_connections_fan_${receipts[0]}`;
    const batch = createMessageBatch<QueuedWork>("webhook-work", [
      {
        id,
        timestamp: new Date(),
        attempts: 1,
        body: { source, database: "DB", receiptIds: receipts, relayGrant: true },
      },
    ]);
    const ctx = createExecutionContext();
    const sent: SentWork[] = [];
    // The queue records what is sent and delivers nothing, so only this invocation's sends reach the lane.
    await worker.queue(batch, { ...env, WORK_QUEUE: recordingQueue(sent) }, ctx);
    expect((await getQueueResult(batch, ctx)).explicitAcks).toEqual([id]);

    // Each event's own route and the first five further ones go with its attempt; sixteen at once before.
    const withAttempt = routes.slice(0, ATTEMPTS_IN_FLIGHT);
    const onTheirOwn = routes.slice(ATTEMPTS_IN_FLIGHT);
    const requests = (await lane("fan-connections")).filter((request) =>
      receipts.some((receiptId) => request.headers["idempotency-key"]!.startsWith(`${receiptId}:`)),
    );
    expect(keysOf(requests).sort()).toEqual(
      receipts.flatMap((receiptId) => withAttempt.map((route) => `${receiptId}:${route}`)).sort(),
    );
    expect(Math.max(...requests.map((request) => request.openOnArrival))).toBeLessThanOrEqual(ATTEMPTS_IN_FLIGHT);
    // The other two of each are written pending, unattempted, and sent at once on a message naming their route.
    for (const receiptId of receipts)
      for (const route of onTheirOwn)
        expect(await deliveryRow(receiptId, route), `${receiptId}:${route}`).toMatchObject({
          status: "pending",
          attempts: 0,
        });
    const sentOnTheirOwn = sent.flatMap((message) =>
      receiptIdsOf(message.body).map(
        (receiptId) => `${receiptId}:${routeNamedBy(message.body)}@${message.delaySeconds}`,
      ),
    );
    expect(sentOnTheirOwn.sort()).toEqual(
      receipts.flatMap((receiptId) => onTheirOwn.map((route) => `${receiptId}:${route}@0`)).sort(),
    );
  });
});
