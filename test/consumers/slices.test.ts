import { env } from "cloudflare:workers";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { COMMIT_MARGIN_MS, externalCallBudgetMs, mayStartAttempt } from "../../src/consumers/attempt/slice-budget";
import { LEASE_MS } from "../../src/consumers/lease/lease";
import { processBatch } from "../../src/consumers/receipts/process";
import { difference, meterReading } from "../../src/lib/meter";
import { MAX_DESTINATION_TIMEOUT_MS } from "../../src/sources/config";
import { attemptRows, receiptRow, seedReceipt, standinRequests } from "./support/processing";

/**
 * One consumer slice holds up to 50 receipts and runs six at a time, so its forwards go out in waves. The source
 * proc-forward-slow points at a stand-in that answers 204 only after 2.5 s (its forward timeout is 5 s): the
 * second wave leaves about 2.5 s after the slice began.
 */
const WAVE_MS = 2500;
const LONGEST_MS = 5000;

async function seedSlowForwards(count: number): Promise<string[]> {
  const receiptIds: string[] = [];
  for (let index = 0; index < count; index += 1) {
    receiptIds.push(
      await seedReceipt({
        source: "proc-forward-slow",
        payload: { type: "order.paid", data: { order: `ord_${index}` } },
      }),
    );
  }
  return receiptIds;
}

describe("a slice of slow forwards", () => {
  it("signs each forward with the time it is sent, not the slice's start", async () => {
    const receiptIds = await seedSlowForwards(12);
    const verdicts = await processBatch(env, receiptIds);
    const verifier = new Webhook(env.GATEWAY_SIGNING_SECRET);
    const skews: number[] = [];
    for (const receiptId of receiptIds) {
      expect(verdicts.get(receiptId)).toEqual({ kind: "done", status: "processed" });
      const [request, ...more] = await standinRequests(receiptId);
      expect(more).toHaveLength(0);
      expect(() => verifier.verify(request!.body, request!.headers)).not.toThrow();
      // A verifier with a tolerance measures exactly this: how long before its arrival the forward was signed.
      skews.push(request!.receivedAt - Number(request!.headers["webhook-timestamp"]) * 1000);
    }
    // The timestamp is whole seconds, so a forward signed as it leaves arrives under a second after it; the second
    // wave signed at the slice's start would arrive at least 2.5 s after.
    expect(Math.max(...skews)).toBeLessThan(WAVE_MS - 500);
    // The audit trail agrees: the second wave's attempts started when they ran.
    const starts = await Promise.all(receiptIds.map(async (receiptId) => (await attemptRows(receiptId))[0]!.startedAt));
    expect(Math.max(...starts) - Math.min(...starts)).toBeGreaterThanOrEqual(WAVE_MS - 100);
  });

  it("starts no attempt that could outlast the consumer's invocation: the rest go back unattempted, leases released", async () => {
    const receiptIds = await seedSlowForwards(12);
    // Room for exactly one wave: an attempt may start only while its 5 s timeout and the commit margin still fit.
    const invocationEndsBy = Date.now() + LONGEST_MS + COMMIT_MARGIN_MS + 1000;
    const verdicts = await processBatch(env, receiptIds, Date.now(), invocationEndsBy);

    const processed = receiptIds.filter((receiptId) => verdicts.get(receiptId)?.kind === "done");
    const sentBack = receiptIds.filter((receiptId) => verdicts.get(receiptId)?.kind === "retry");
    expect(processed).toHaveLength(6);
    expect(sentBack).toHaveLength(6);
    for (const receiptId of sentBack) {
      expect(verdicts.get(receiptId)).toEqual({ kind: "retry", delaySeconds: 0, notStarted: true });
      const row = await receiptRow(receiptId);
      // No attempt was made, so none is spent or recorded, and the lease is free for the next consumer at once.
      expect(row).toMatchObject({ status: "pending", attempts: 0, leaseUntil: null, nextAttemptAt: null });
      expect(await attemptRows(receiptId)).toHaveLength(0);
      expect(await standinRequests(receiptId)).toHaveLength(0);
    }

    // The next consumer, with time to spare, takes them straight away.
    const again = await processBatch(env, sentBack);
    for (const receiptId of sentBack) expect(again.get(receiptId)).toEqual({ kind: "done", status: "processed" });
  });
});

describe("a slice of first attempts of a source with a handler route, a forward route and one filtered out", () => {
  it("runs every one: the lease taken for the slice leaves the waves after the first a handler's budget, not none", async () => {
    // Twelve is two waves of six. The forward makes the slice lease them up front; the handler's external calls
    // (none here) would draw on what the lease leaves, so an attempt that waited for a slot still starts.
    const receiptIds: string[] = [];
    for (let index = 0; index < 12; index += 1)
      receiptIds.push(
        await seedReceipt({
          source: "proc-fanout-handler-forward",
          payload: { type: "account.credited", data: { account: `acct_slice_${index}`, amount: 1 } },
          eventType: "account.credited",
        }),
      );
    const before = meterReading().totals;
    const verdicts = await processBatch(env, receiptIds);
    const spent = difference(meterReading().totals, before);
    for (const receiptId of receiptIds) {
      expect(verdicts.get(receiptId)).toEqual({ kind: "done", status: "processed" });
      expect(await standinRequests(`${receiptId}:backend`)).toHaveLength(1);
      expect(await standinRequests(`${receiptId}:audit`)).toHaveLength(0);
    }
    // The budget of two matched routes and one filtered out (docs/routing.md, "Fan-out"): per event the lease (the
    // forward's), the commit and the backend's deliveries row, after the relay's 2; the slice's D1 calls, not one
    // more per event. An attempt sent back unattempted would add its lease, its release and their calls.
    expect(spent.d1RowsWritten - spent.d1HandlerRowsWritten).toBe(3 * receiptIds.length);
    expect(spent.d1Calls).toBeLessThanOrEqual(4);
  });
});

describe("externalCallBudgetMs", () => {
  const t0 = 1_800_000_000_000;
  it("is the destination cap while the limits leave room for it", () => {
    const limits = { invocationEndsBy: Number.POSITIVE_INFINITY, leaseUntil: t0 + LEASE_MS };
    expect(externalCallBudgetMs(limits, Date.now(), t0)).toBe(MAX_DESTINATION_TIMEOUT_MS);
  });
  it("ends, commit margin included, inside the lease taken for the slice and inside the invocation", () => {
    const lease = { invocationEndsBy: Number.POSITIVE_INFINITY, leaseUntil: t0 + LEASE_MS };
    expect(externalCallBudgetMs(lease, Date.now(), t0 + 30_000)).toBe(LEASE_MS - COMMIT_MARGIN_MS - 30_000);
    const invocation = { invocationEndsBy: t0 + 2 * 60_000, leaseUntil: Number.POSITIVE_INFINITY };
    expect(externalCallBudgetMs(invocation, t0, 0)).toBe(60_000);
    expect(externalCallBudgetMs(invocation, t0 + 5 * 60_000, 0)).toBe(0);
  });
});

describe("mayStartAttempt", () => {
  const t0 = 1_800_000_000_000;
  it("admits an attempt only while it can end, commit margin included, inside the lease taken for its slice", () => {
    const limits = { invocationEndsBy: Number.POSITIVE_INFINITY, leaseUntil: t0 + LEASE_MS };
    const latestStart = t0 + LEASE_MS - LONGEST_MS - COMMIT_MARGIN_MS;
    expect(mayStartAttempt(limits, LONGEST_MS, Date.now(), t0)).toBe(true);
    expect(mayStartAttempt(limits, LONGEST_MS, Date.now(), latestStart)).toBe(true);
    expect(mayStartAttempt(limits, LONGEST_MS, Date.now(), latestStart + 1)).toBe(false);
  });
  it("and inside the consumer invocation, in real time", () => {
    const limits = { invocationEndsBy: t0 + 10 * 60_000, leaseUntil: Number.POSITIVE_INFINITY };
    expect(mayStartAttempt(limits, LONGEST_MS, t0 + 10 * 60_000 - LONGEST_MS - COMMIT_MARGIN_MS, 0)).toBe(true);
    expect(mayStartAttempt(limits, LONGEST_MS, t0 + 10 * 60_000 - LONGEST_MS - COMMIT_MARGIN_MS + 1, 0)).toBe(false);
  });
});
