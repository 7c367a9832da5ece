import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { processWithFollowOns } from "../../src/consumers/receipts/follow-on";
import type { QueuedWork } from "../../src/model/work-message";
import { seedReceipt } from "../consumers/support/processing";
import { deliveryRow, keysOf, lane, recordingQueue } from "./gate-support";

/**
 * A max_in_flight = 1 route that is a source's SECOND route (its deliveries in their own rows, as in the bench's held
 * phase) keeps its cap busy (issue 37 §4): the gate keeps the backlog, and each release hands the next delivery on to
 * the consumer that freed the slot, which runs it in the same invocation — whichever batch held it — instead of
 * sending it on the queue. Counts, never durations (the speed is the bench's: docs/performance.md). Each call runs
 * with a queue that records what is sent and delivers nothing, so no other consumer races it.
 */

const source = "gate-fanout-capped-one";

async function backlog(n: number): Promise<string[]> {
  const receiptIds: string[] = [];
  for (let index = 0; index < n; index += 1)
    receiptIds.push(await seedReceipt({ source, payload: { type: "account.credited", data: { amount: index } } }));
  return receiptIds;
}

async function cappedRequestsFor(receiptIds: readonly string[]) {
  const mine = new Set(receiptIds.map((receiptId) => `${receiptId}:capped`));
  return (await lane("fan-capped-one")).filter((request) => mine.has(request.headers["idempotency-key"]!));
}

async function expectEachDeliveredOnce(receiptIds: readonly string[]): Promise<void> {
  for (const receiptId of receiptIds)
    expect(await deliveryRow(receiptId, "capped"), receiptId).toMatchObject({ status: "processed", attempts: 1 });
  const requests = await cappedRequestsFor(receiptIds);
  expect(keysOf(requests).sort()).toEqual(receiptIds.map((receiptId) => `${receiptId}:capped`).sort());
  expect(Math.max(...requests.map((request) => request.openOnArrival))).toBe(1);
}

describe("a backlog of further deliveries to a max_in_flight = 1 route", () => {
  it("is delivered from one batch in one consumer call, the gate handing each next one on, each once", {
    timeout: 120_000,
  }, async () => {
    const receiptIds = await backlog(6);
    const sent: QueuedWork[] = [];
    await processWithFollowOns({ ...env, WORK_QUEUE: recordingQueue(sent) }, receiptIds, Number.POSITIVE_INFINITY);
    // Before: one delivered; each next one woken into a queue message of its own, naming the route, due now.
    await expectEachDeliveredOnce(receiptIds);
  });

  it("never has two in flight when two consumer calls take halves of the backlog at once, and delivers each once", {
    timeout: 240_000,
  }, async () => {
    const receiptIds = await backlog(10);
    const sent: QueuedWork[] = [];
    const queueEnv = { ...env, WORK_QUEUE: recordingQueue(sent) };
    await Promise.all([
      processWithFollowOns(queueEnv, receiptIds.slice(0, 5), Number.POSITIVE_INFINITY),
      processWithFollowOns(queueEnv, receiptIds.slice(5), Number.POSITIVE_INFINITY),
    ]);
    // Whichever call held a delivery, the release that woke it ran it: nothing is left for a queue message to bring.
    await expectEachDeliveredOnce(receiptIds);
  });
});
