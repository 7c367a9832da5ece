import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { FOLLOW_ONS_PER_SLICE, processWithFollowOns } from "../../src/consumers/receipts/follow-on";
import { receiptRow, seedReceipt } from "../consumers/support/processing";
import { eventually } from "../support/deliveries";
import { keysOf, lane } from "./gate-support";

/**
 * An in-flight-capped route keeps its cap busy within one consumer invocation (issue 37 §4): a freed slot's woken
 * delivery that the same batch holds runs next in that invocation, instead of a queue round trip each. Counts, never
 * durations (the speed is the bench's: docs/performance.md).
 */

const source = "gate-capped-one";

async function backlog(n: number): Promise<string[]> {
  const receiptIds: string[] = [];
  for (let index = 0; index < n; index += 1)
    receiptIds.push(await seedReceipt({ source, payload: { type: "account.credited", data: { amount: index } } }));
  return receiptIds;
}

async function requestsFor(receiptIds: readonly string[]) {
  const mine = new Set(receiptIds);
  return (await lane("capped-one")).filter((request) => mine.has(request.headers["idempotency-key"]!));
}

describe("a backlog on a max_in_flight = 1 route", () => {
  it("is delivered from one batch in one consumer call, none sent back on the queue, each once", {
    timeout: 120_000,
  }, async () => {
    const receiptIds = await backlog(6);
    const verdicts = await processWithFollowOns(env, receiptIds, Number.POSITIVE_INFINITY);
    // Before: one delivered, five back on the queue (each woken one by a queue send of its own).
    expect(receiptIds.filter((id) => verdicts.get(id)?.kind === "retry")).toEqual([]);
    for (const row of await Promise.all(receiptIds.map(receiptRow))) {
      expect(row.status).toBe("processed");
      expect(row.attempts).toBe(1);
    }
    const requests = await requestsFor(receiptIds);
    expect(keysOf(requests)).toEqual(receiptIds);
    expect(Math.max(...requests.map((request) => request.openOnArrival))).toBe(1);
  });

  it("runs at most FOLLOW_ONS_PER_SLICE follow-ons per call; the next woken one goes back on the queue due now", {
    timeout: 240_000,
  }, async () => {
    const receiptIds = await backlog(FOLLOW_ONS_PER_SLICE + 3);
    const verdicts = await processWithFollowOns(env, receiptIds, Number.POSITIVE_INFINITY);
    const done = receiptIds.filter((id) => verdicts.get(id)?.kind === "done");
    expect(done).toEqual(receiptIds.slice(0, FOLLOW_ONS_PER_SLICE + 1));
    // The one its slot woke last goes at once; the one behind it still waits for a slot.
    expect(verdicts.get(receiptIds[FOLLOW_ONS_PER_SLICE + 1]!)).toEqual({ kind: "retry", delaySeconds: 0 });
    const woken = await receiptRow(receiptIds[FOLLOW_ONS_PER_SLICE + 1]!);
    expect(woken.status).toBe("pending");
    expect(woken.nextAttemptAt).toBeLessThanOrEqual(Date.now());
    expect(verdicts.get(receiptIds[FOLLOW_ONS_PER_SLICE + 2]!)).toMatchObject({ kind: "retry" });
    expect(await requestsFor(receiptIds)).toHaveLength(FOLLOW_ONS_PER_SLICE + 1);
  });

  it("never has two in flight when two consumer calls take halves of the backlog at once", {
    timeout: 240_000,
  }, async () => {
    const receiptIds = await backlog(8);
    await Promise.all([
      processWithFollowOns(env, receiptIds.slice(0, 4), Number.POSITIVE_INFINITY),
      processWithFollowOns(env, receiptIds.slice(4), Number.POSITIVE_INFINITY),
    ]);
    // Whatever went back on the queue (a woken delivery the other call held), as its message comes back.
    await eventually(
      async () => {
        const rows = await Promise.all(receiptIds.map(receiptRow));
        const pending = receiptIds.filter((_, index) => rows[index]!.status !== "processed");
        if (pending.length === 0) return true;
        await processWithFollowOns(env, pending, Number.POSITIVE_INFINITY);
        return undefined;
      },
      180_000,
      "every receipt processed",
    );
    const requests = await requestsFor(receiptIds);
    expect(keysOf(requests).sort()).toEqual([...receiptIds].sort());
    expect(Math.max(...requests.map((request) => request.openOnArrival))).toBe(1);
    for (const row of await Promise.all(receiptIds.map(receiptRow))) expect(row.attempts).toBe(1);
  });
});
