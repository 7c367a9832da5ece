import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { LEASE_MS } from "../../src/consumers/lease/lease";
import { processReceipt } from "../../src/consumers/receipts/process";
import { returnExpiredLeases } from "../../src/reconcile/lease-return";
import { account } from "../support/deliveries";
import { lossyQueue } from "../support/failpoints";
import { hangNextRun, testEnv } from "./support/handlers";
import { attemptRows, receiptRow, seedReceipt, standinOrigin } from "./support/processing";

/**
 * The attempt history is the audit trail: every attempt that ran appears once, under its own number, with the
 * outcome it really had — never a guess that its real outcome could not replace, never another attempt's number.
 */

async function generationOf(receiptId: string): Promise<number> {
  const row = await env.DB.prepare("SELECT lease_generation AS generation FROM receipts WHERE id = ?")
    .bind(receiptId)
    .first<{ generation: number }>();
  return row!.generation;
}

async function history(receiptId: string) {
  return (await attemptRows(receiptId)).map(({ attemptNumber, outcome }) => [attemptNumber, outcome]);
}

function externalPayload(accountId: string, extra: Record<string, unknown> = {}) {
  return { account: accountId, callUrl: `${standinOrigin()}/script/200`, timeoutMs: 1500, ...extra };
}

describe("an attempt's own number and true outcome", () => {
  it("keeps a slow consumer's late commit from moving lease_generation back, and its success replaces the presumed 'unknown'", async () => {
    const eventKey = "evt_history_late_success";
    const receiptId = await seedReceipt({
      source: "proc-external",
      eventKey,
      payload: externalPayload("acct_history_late"),
    });
    const releaseSlow = hangNextRun(eventKey);
    const releaseSuccessor = hangNextRun(eventKey);
    const t0 = Date.now();

    // The slow consumer leases generation 1 and stalls past its lease; a successor takes over (generation 2) and
    // stalls too, so both are mid-attempt when the slow one finishes.
    const slow = processReceipt(testEnv, receiptId, t0);
    await releaseSlow.entered;
    const successor = processReceipt(testEnv, receiptId, t0 + LEASE_MS + 1);
    await releaseSuccessor.entered;
    expect(await generationOf(receiptId)).toBe(2);

    releaseSlow();
    expect(await slow).toEqual({ kind: "done", status: "processed" });
    // The generation only ever increases: the successor's lease is still the latest.
    expect(await generationOf(receiptId)).toBe(2);

    releaseSuccessor();
    expect(await successor).toEqual({ kind: "done", status: "duplicate" });
    expect(await generationOf(receiptId)).toBe(2);
    expect((await account("acct_history_late"))?.credits).toBe(1);
    // Attempt 1 succeeded (its commit is the one that applied), attempt 2 found it done: each once, each true.
    expect(await history(receiptId)).toEqual([
      [1, "processed"],
      [2, "duplicate"],
    ]);
  });

  it("lets the real outcome of an attempt the cron presumed lost replace its 'unknown' row", async () => {
    const eventKey = "evt_history_cron_unknown";
    const receiptId = await seedReceipt({
      source: "proc-external",
      eventKey,
      payload: externalPayload("acct_history_cron", { failAfterCall: true }),
    });
    const t0 = Date.now();
    // Attempt 1 fails: a leased retry is scheduled.
    expect((await processReceipt(testEnv, receiptId, t0)).kind).toBe("retry");
    const { nextAttemptAt } = await receiptRow(receiptId);

    // Attempt 2 leases generation 2 and stalls past its lease.
    const release = hangNextRun(eventKey);
    const slow = processReceipt(testEnv, receiptId, nextAttemptAt!);
    await release.entered;
    expect(await generationOf(receiptId)).toBe(2);

    // The cron finds the lease run out and presumes the attempt's outcome unknown.
    expect(
      await returnExpiredLeases({ ...testEnv, WORK_QUEUE: lossyQueue() }, nextAttemptAt! + LEASE_MS + 1),
    ).toBeGreaterThanOrEqual(1);
    expect(await history(receiptId)).toEqual([
      [1, "retry"],
      [2, "unknown"],
    ]);
    const returned = await receiptRow(receiptId);
    expect(returned).toMatchObject({ status: "pending", leaseUntil: null });

    // The slow consumer was only slow: it finishes with a real failure. That is attempt 2's outcome, recorded once;
    // the receipt the cron already handed on is left as it was.
    release();
    expect((await slow).kind).toBe("retry");
    const rows = await attemptRows(receiptId);
    expect(rows.map(({ attemptNumber, outcome }) => [attemptNumber, outcome])).toEqual([
      [1, "retry"],
      [2, "retry"],
    ]);
    expect(rows[1]!.error).toBe("deliberate failure after the external call");
    expect(await receiptRow(receiptId)).toEqual(returned);
  });

  it("writes no row for a lease-free failure that lost its fence to a run that committed: the number is the winner's", async () => {
    const eventKey = "evt_history_fence_lost";
    const receiptId = await seedReceipt({
      source: "proc-handler",
      eventKey,
      payload: { account: "acct_history_fence", amount: 3 },
    });
    // Two lease-free runs read generation 0. The first stalls, then fails permanently; the second commits first.
    const releaseSlow = hangNextRun(eventKey, "the slow run's failure");
    const t0 = Date.now();
    const slow = processReceipt(testEnv, receiptId, t0);
    await releaseSlow.entered;
    expect(await processReceipt(testEnv, receiptId, t0)).toEqual({ kind: "done", status: "processed" });

    releaseSlow();
    await slow;
    expect(await receiptRow(receiptId)).toMatchObject({ status: "processed", attempts: 1, lastError: null });
    expect((await account("acct_history_fence"))?.credits).toBe(3);
    // Attempt 1 is the run that committed: the slow run's failure must not claim its number.
    expect(await history(receiptId)).toEqual([[1, "processed"]]);
  });
});
