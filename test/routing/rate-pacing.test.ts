import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { processBatch } from "../../src/consumers/receipts/process";
import type { DeliveryControl } from "../../src/gate/control";
import {
  type AdmitOptions,
  admit,
  EMPTY_GATE,
  type GateState,
  PACED_SEND_MARGIN_MS,
  RATE_GUARD_MS,
} from "../../src/gate/decide";
import { receiptRow, seedReceipt } from "../consumers/support/processing";
import { eventually } from "../support/deliveries";
import { keysOf, lane } from "./gate-support";

/**
 * A rate-limited route moves a backlog at the speed its limit allows (issue 37 §4): a delivery whose send time is
 * within the gate's reach is admitted for that time and waits for it in its consumer, instead of going back on the
 * queue for whole seconds; and no window ever holds more than the limit. Counts, never durations.
 */

const threePerSecond: DeliveryControl = {
  rateLimit: { count: 3, windowMs: 1000, text: "3/s" },
  maxInFlight: null,
  breaker: null,
  paused: false,
};
const options: AdmitOptions = { slotMs: 300_000, atOnce: 6, reserveMs: 2000 };

/** The most sends any window of `windowMs` can hold, each send anywhere from its start to its start + margin. */
function busiestWindow(sends: readonly { from: number; by: number }[], windowMs: number): number {
  return Math.max(...sends.map(({ from: t }) => sends.filter(({ from, by }) => from <= t && by > t - windowMs).length));
}

describe("pacing a rate-limited backlog", () => {
  it("admits for later the sends within reach, each spaced a window after the limit's earlier ones", () => {
    const ids = Array.from({ length: 9 }, (_, n) => `r${n}`);
    const first = admit(EMPTY_GATE, threePerSecond, ids, 0, options);
    // Three go now; three start a window after those have surely left; the next three are beyond reach.
    expect(first.admitted).toEqual(["r0", "r1", "r2", "r3", "r4", "r5"]);
    expect(first.startAt).toEqual({ r3: 1000 + RATE_GUARD_MS, r4: 1000 + RATE_GUARD_MS, r5: 1000 + RATE_GUARD_MS });
    expect(first.held.map((hold) => hold.id)).toEqual(["r6", "r7", "r8"]);
    // r6 could start at 1000 + RATE_GUARD_MS + PACED_SEND_MARGIN_MS + 1000, 2350: 1100 after the last paced send
    // (1250), when its caller sends it back. It comes straight back, its turn then within reach, rather than a
    // whole second later, after its turn.
    expect(first.held[0]).toEqual({ id: "r6", waitMs: 0, reason: "rate-limit" });
    // A caller that cannot wait is never given a later start: the old hold, for the whole wait.
    const unpaced = admit(EMPTY_GATE, threePerSecond, ids, 0, { ...options, reserveMs: 0 });
    expect(unpaced.admitted).toEqual(["r0", "r1", "r2"]);
    expect(unpaced.startAt).toEqual({});
    // Held, not paced: back on the queue with no delay, so it is back to a consumer that paces it well before its turn
    // (1250), rather than a whole second or two later.
    expect(unpaced.held[0]).toEqual({ id: "r3", waitMs: 0, reason: "rate-limit" });
  });

  it("keeps every window within the limit, however each send slips within its margin, and keeps the route busy", () => {
    // A backlog of 60 asked about as a queue would bring it back: each held delivery again after its wait (whole
    // seconds), counted from when its caller sends it back (once its last paced send has started), plus a batch
    // timeout.
    let state: GateState = EMPTY_GATE;
    const sends: { from: number; by: number }[] = [];
    let waiting = Array.from({ length: 60 }, (_, n) => ({ id: `r${String(n).padStart(2, "0")}`, dueAt: 0 }));
    for (let step = 0; step < 200 && waiting.length > 0; step += 1) {
      const now = Math.min(...waiting.map((delivery) => delivery.dueAt));
      const due = waiting.filter((delivery) => delivery.dueAt <= now).slice(0, 25);
      const answer = admit(
        state,
        threePerSecond,
        due.map((delivery) => delivery.id),
        now,
        options,
      );
      state = answer.state;
      for (const id of answer.admitted) {
        const from = answer.startAt[id] ?? now;
        sends.push({ from, by: from + (id in answer.startAt ? PACED_SEND_MARGIN_MS : RATE_GUARD_MS) });
      }
      const heldFor = new Map(answer.held.map((hold) => [hold.id, hold.waitMs]));
      const sentBackAt = Math.max(now, ...Object.values(answer.startAt));
      waiting = waiting.flatMap((delivery) => {
        if (answer.admitted.includes(delivery.id)) return [];
        const wait = heldFor.get(delivery.id);
        return [
          wait === undefined ? delivery : { ...delivery, dueAt: sentBackAt + Math.ceil(wait / 1000) * 1000 + 250 },
        ];
      });
    }
    expect(waiting).toEqual([]);
    expect(busiestWindow(sends, 1000)).toBeLessThanOrEqual(3);
    // The last of 60 starts within 20 windows of the first, each window + the paced margin: at least 90 % of 3/s.
    const last = Math.max(...sends.map((send) => send.from));
    expect(last).toBeLessThanOrEqual(Math.ceil(60 / 3) * (1000 + PACED_SEND_MARGIN_MS) + RATE_GUARD_MS);
  });
});

describe("a rate-limited backlog through the consumer", () => {
  it("sends what the limit allows within reach in one consumer call, fewer go back on the queue, and no window holds more than the limit", {
    timeout: 120_000,
  }, async () => {
    const receiptIds: string[] = [];
    for (let n = 0; n < 9; n += 1)
      receiptIds.push(
        await seedReceipt({ source: "gate-paced", payload: { type: "account.credited", data: { amount: n } } }),
      );
    const first = await processBatch(env, receiptIds, Date.now());
    // Three at once and three a window later, from this one call: only three go back on the queue to wait (before:
    // six). (A paced one whose wait ended past its margin, on a very busy machine, is not sent and goes straight
    // back, due at once: it never waits on the queue for its turn.)
    expect(receiptIds.filter((id) => first.get(id)?.kind === "done").slice(0, 3)).toEqual(receiptIds.slice(0, 3));
    const sentBack = receiptIds.filter((id) => first.get(id)?.kind === "retry");
    expect(sentBack.slice(-3)).toEqual(receiptIds.slice(6));
    // Those come straight back: sent back once the paced three have started, their turn is then within reach (a
    // whole second's delay would bring them back after it).
    expect(receiptIds.slice(6).map((id) => first.get(id))).toEqual(
      receiptIds.slice(6).map(() => ({ kind: "retry", delaySeconds: 0 })),
    );
    // The rest, as their messages come back when due.
    await eventually(
      async () => {
        const rows = await Promise.all(receiptIds.map(receiptRow));
        const pending = receiptIds.filter((_, index) => rows[index]!.status !== "processed");
        if (pending.length === 0) return true;
        await processBatch(env, pending, Date.now());
        return undefined;
      },
      90_000,
      "every receipt processed",
    );
    const mine = new Set(receiptIds);
    const requests = (await lane("paced")).filter((request) => mine.has(request.headers["idempotency-key"]!));
    expect(keysOf(requests).sort()).toEqual([...receiptIds].sort());
    const arrivals = requests.map((request) => request.receivedAt).sort((a, b) => a - b);
    const busiest = Math.max(
      ...arrivals.map((start) => arrivals.filter((at) => at >= start && at < start + 1000).length),
    );
    expect(busiest).toBeLessThanOrEqual(3);
    for (const row of await Promise.all(receiptIds.map(receiptRow))) expect(row.attempts).toBe(1);
  });
});
