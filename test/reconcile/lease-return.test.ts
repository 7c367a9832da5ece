import { describe, expect, it } from "vitest";
import { outboundIdempotencyKey } from "../../src/consumers/attempt/external-calls";
import { LEASE_MS } from "../../src/consumers/lease/lease";
import { processReceipt } from "../../src/consumers/receipts/process";
import { returnExpiredLeases } from "../../src/reconcile/lease-return";
import { hangNextRun, testEnv } from "../consumers/support/handlers";
import { attemptRows, receiptRow, seedReceipt, standinOrigin, standinRequests } from "../consumers/support/processing";
import { lossyQueue } from "../support/failpoints";

/**
 * The cron's lease return finds an attempt whose consumer died (its lease ran out). It decides that attempt exactly
 * as the consumer would: counted when it took its lease, so once the count spends the retry budget the receipt is
 * dead there, not handed back for one more run.
 */

const cron = { ...testEnv, WORK_QUEUE: lossyQueue() };

async function history(receiptId: string) {
  return (await attemptRows(receiptId)).map(({ attemptNumber, outcome }) => [attemptNumber, outcome]);
}

describe("the cron's return of a lease that ran out", () => {
  it("dead-letters a receipt whose abandoned attempt spent its retry budget, and hands back one with retries left", async () => {
    // proc-external-fast allows 2 retries: 3 attempts in all. Attempt 1 fails (a leased retry with a due time).
    const eventKey = "evt_lease_return_spent";
    const receiptId = await seedReceipt({
      source: "proc-external-fast",
      eventKey,
      payload: {
        account: "acct_lease_return",
        callUrl: `${standinOrigin()}/script/200`,
        timeoutMs: 1500,
        failAfterCall: true,
      },
    });
    expect((await processReceipt(testEnv, receiptId, Date.now())).kind).toBe("retry");

    for (const attempt of [2, 3]) {
      // The attempt takes its lease (counted) with its external call, then its isolate dies: it never resumes.
      const { nextAttemptAt } = await receiptRow(receiptId);
      const crashed = hangNextRun(eventKey);
      const startedAt = Math.max(nextAttemptAt!, Date.now());
      void processReceipt(testEnv, receiptId, startedAt);
      await crashed.entered;
      expect((await receiptRow(receiptId)).attempts).toBe(attempt);
      // The cron finds the lease run out.
      expect(await returnExpiredLeases(cron, startedAt + LEASE_MS + 1)).toBe(1);
      if (attempt === 2)
        expect(await receiptRow(receiptId)).toMatchObject({ status: "pending", leaseUntil: null, attempts: 2 });
    }

    const row = await receiptRow(receiptId);
    expect(row).toMatchObject({ status: "dead", attempts: 3, leaseUntil: null, nextAttemptAt: null, hasBody: 1 });
    expect(row.lastError).toMatch(/^gave up after 3 attempts: lease expired before the attempt finished/);
    expect(await history(receiptId)).toEqual([
      [1, "retry"],
      [2, "unknown"],
      [3, "unknown"],
    ]);
    // A later delivery runs nothing: three attempts reached the external API, never a fourth.
    expect(await processReceipt(testEnv, receiptId, Date.now() + 3 * LEASE_MS)).toEqual({
      kind: "done",
      status: "dead",
    });
    expect(await standinRequests(outboundIdempotencyKey(receiptId, "notify"))).toHaveLength(3);
  });
});
