import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { processReceipt } from "../../src/consumers/receipts/process";
import { replayReceipt } from "../../src/replay/replay-receipts";
import { lossyQueue } from "../support/failpoints";
import { receiptRow, seedReceipt } from "./support/processing";

/**
 * The retry deadline (`retry.max_age`). proc-forward-deadline forwards to a destination that always answers 503
 * (transient), retries every 60 s without jitter, and gives up 10 minutes into a run.
 */
const MINUTE = 60_000;
const DAY = 24 * 60 * MINUTE;
const source = "proc-forward-deadline";

describe("the retry deadline", () => {
  it("ends a run whose next retry would fall past max_age, counted from arrival", async () => {
    const t0 = Date.now();
    const receiptId = await seedReceipt({ source, payload: { n: 1 }, receivedAt: t0 - 9.5 * MINUTE });
    expect(await processReceipt(env, receiptId, t0)).toEqual({ kind: "done", status: "dead" });
    expect((await receiptRow(receiptId)).lastError).toMatch(/^retry deadline \(max_age\) passed after 1 attempts/);

    // Inside the deadline the same failure is retried.
    const fresh = await seedReceipt({ source, payload: { n: 2 }, receivedAt: t0 - MINUTE });
    expect(await processReceipt(env, fresh, t0)).toEqual({ kind: "retry", delaySeconds: 60 });
    expect(await receiptRow(fresh)).toMatchObject({ status: "pending", nextAttemptAt: expect.any(Number) });
  });

  it("starts afresh when a week-old dead letter is replayed: its first transient failure is retried, not fatal", async () => {
    const t0 = Date.now();
    const receiptId = await seedReceipt({ source, payload: { n: 3 }, receivedAt: t0 - 7 * DAY, status: "dead" });
    // The queue message is dropped so this test plays the consumer itself.
    expect(await replayReceipt({ ...env, WORK_QUEUE: lossyQueue() }, receiptId, t0)).toMatchObject({
      kind: "replayed",
      previousStatus: "dead",
    });
    expect(await processReceipt(env, receiptId, t0)).toEqual({ kind: "retry", delaySeconds: 60 });
    expect(await receiptRow(receiptId)).toMatchObject({ status: "pending", attempts: 1 });

    // The replay's own budget still ends: ten minutes after the replay, the run gives up.
    const late = t0 + 9.5 * MINUTE;
    expect(await processReceipt(env, receiptId, late)).toEqual({ kind: "done", status: "dead" });
    expect((await receiptRow(receiptId)).lastError).toMatch(/^retry deadline \(max_age\) passed/);
  });
});
