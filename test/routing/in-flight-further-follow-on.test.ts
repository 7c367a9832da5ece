import { describe, expect, it } from "vitest";
import { seedFurtherDelivery } from "../consumers/support/processing";
import { backlog, consumeOnce, sentDueNow } from "./follow-on-support";
import { deliveryRow, keysOf, lane } from "./gate-support";

/**
 * A max_in_flight = 1 route that is a source's SECOND route (its deliveries in their own rows, as in the bench's held
 * phase) keeps its cap busy (issue 37 §4): the gate keeps the backlog, and each release hands the next delivery on to
 * the consumer that freed the slot, which runs it in the same invocation once its batch is acked — whichever batch
 * held it — instead of sending it on the queue. A message of further deliveries to the route does the same
 * (`processDeliveriesWithFollowOns`), its held ones answered by their follow-ons. Driven through the real queue
 * handler (consumeWork). Counts, never durations (the speed is the bench's: docs/performance.md).
 */

const source = "gate-fanout-capped-one";

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
  it("is delivered from one batch in one consumer invocation, the gate handing each next one on, each once", {
    timeout: 120_000,
  }, async () => {
    const receiptIds = await backlog(source, 6);
    const { id, result, sent } = await consumeOnce(source, receiptIds);
    expect(result.explicitAcks).toEqual([id]);
    // Before: one delivered; each next one woken into a queue message of its own, naming the route, due now.
    expect(sentDueNow(sent)).toEqual([]);
    await expectEachDeliveredOnce(receiptIds);
  });

  it("named in one message of further deliveries, is delivered in that invocation, each held one answered by its follow-on", {
    timeout: 120_000,
  }, async () => {
    const receiptIds: string[] = [];
    for (let index = 0; index < 6; index += 1)
      receiptIds.push(
        await seedFurtherDelivery({
          source,
          payload: { type: "account.credited", data: { amount: index } },
          ownRoute: "plain",
          route: "capped",
        }),
      );
    const { id, result, sent } = await consumeOnce(source, receiptIds, "capped");
    expect(result.explicitAcks).toEqual([id]);
    // Before: one delivered, the rest sent back (each held one's retry, and each woken one due now).
    expect(sent).toEqual([]);
    await expectEachDeliveredOnce(receiptIds);
  });

  it("never has two in flight when two consumer invocations take halves of the backlog at once, and delivers each once", {
    timeout: 240_000,
  }, async () => {
    const receiptIds = await backlog(source, 10);
    await Promise.all([consumeOnce(source, receiptIds.slice(0, 5)), consumeOnce(source, receiptIds.slice(5))]);
    // Whichever invocation held a delivery, the release that woke it ran it: nothing is left for a message to bring.
    await expectEachDeliveredOnce(receiptIds);
  });
});
