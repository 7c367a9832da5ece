import { describe, expect, it } from "vitest";
import { NOT_STARTED } from "../../src/consumers/decide/decide";
import { FOLLOW_ONS_PER_SLICE, started } from "../../src/consumers/receipts/follow-on";
import { receiptRow } from "../consumers/support/processing";
import { eventually } from "../support/deliveries";
import { backlog, consumeOnce, sentDueNow } from "./follow-on-support";
import { keysOf, lane } from "./gate-support";

/**
 * An in-flight-capped route keeps its cap busy within one consumer invocation (issue 37 §4): once the batch's own
 * verdicts are sent and its message acked, the consumer runs next each delivery its releases woke, instead of a queue
 * round trip each. Driven through the real queue handler (consumeWork). Counts, never durations (the speed is the
 * bench's: docs/performance.md).
 */

const source = "gate-capped-one";

async function requestsFor(receiptIds: readonly string[]) {
  const mine = new Set(receiptIds);
  return (await lane("capped-one")).filter((request) => mine.has(request.headers["idempotency-key"]!));
}

describe("a backlog on a max_in_flight = 1 route", () => {
  it("is delivered from one batch in one consumer invocation, its message acked, none sent back due now, each once", {
    timeout: 120_000,
  }, async () => {
    const receiptIds = await backlog(source, 6);
    const { id, result, sent } = await consumeOnce(source, receiptIds);
    expect(result.explicitAcks).toEqual([id]);
    // Before: one delivered; each next one woken into a queue message of its own, due now.
    expect(sentDueNow(sent)).toEqual([]);
    for (const row of await Promise.all(receiptIds.map(receiptRow))) {
      expect(row.status).toBe("processed");
      expect(row.attempts).toBe(1);
    }
    const requests = await requestsFor(receiptIds);
    expect(keysOf(requests)).toEqual(receiptIds);
    expect(Math.max(...requests.map((request) => request.openOnArrival))).toBe(1);
  });

  it("runs at most FOLLOW_ONS_PER_SLICE follow-ons per invocation; the next woken one goes back on the queue due now", {
    timeout: 240_000,
  }, async () => {
    const receiptIds = await backlog(source, FOLLOW_ONS_PER_SLICE + 3);
    const { sent } = await consumeOnce(source, receiptIds);
    const rows = await Promise.all(receiptIds.map(receiptRow));
    const processed = receiptIds.filter((_, index) => rows[index]!.status === "processed");
    expect(processed).toEqual(receiptIds.slice(0, FOLLOW_ONS_PER_SLICE + 1));
    // The one its slot woke last goes at once; the one behind it still waits for a slot.
    const woken = receiptIds[FOLLOW_ONS_PER_SLICE + 1]!;
    expect(sentDueNow(sent)).toEqual([woken]);
    expect(rows[FOLLOW_ONS_PER_SLICE + 1]!.status).toBe("pending");
    expect(rows[FOLLOW_ONS_PER_SLICE + 1]!.nextAttemptAt).toBeLessThanOrEqual(Date.now());
    expect(rows[FOLLOW_ONS_PER_SLICE + 2]!.status).toBe("pending");
    expect(await requestsFor(receiptIds)).toHaveLength(FOLLOW_ONS_PER_SLICE + 1);

    // Its message delivered, the woken one runs in its reserved slot, and its release hands the last one on: the
    // backlog is done, and the gate holds nothing of it for the next test to wait behind.
    await consumeOnce(source, sentDueNow(sent));
    for (const row of await Promise.all(receiptIds.map(receiptRow))) expect(row).toMatchObject({ status: "processed" });
  });

  it("never has two in flight when two consumer invocations take halves of the backlog at once", {
    timeout: 240_000,
  }, async () => {
    const receiptIds = await backlog(source, 8);
    await Promise.all([consumeOnce(source, receiptIds.slice(0, 4)), consumeOnce(source, receiptIds.slice(4))]);
    // Whatever went back on the queue (a woken delivery the other invocation held), as its message comes back.
    await eventually(
      async () => {
        const rows = await Promise.all(receiptIds.map(receiptRow));
        const pending = receiptIds.filter((_, index) => rows[index]!.status !== "processed");
        if (pending.length === 0) return true;
        await consumeOnce(source, pending);
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

describe("a follow-on round's verdicts", () => {
  it("stop the follow-ons only when no attempt could start: a hold due in 0 s is a decision, not a stall", () => {
    // A rate limit's hold rounds its wait down, so it may answer 0 s: the follow-ons go on past it.
    expect(started({ kind: "retry", delaySeconds: 0 })).toBe(true);
    expect(started({ kind: "retry", delaySeconds: 5 })).toBe(true);
    expect(started({ kind: "done", status: "processed" })).toBe(true);
    // Out of time before the attempt: the rest go back on the queue for a consumer with time left.
    expect(started(NOT_STARTED)).toBe(false);
  });
});
