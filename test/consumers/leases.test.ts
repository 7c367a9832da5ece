import { describe, expect, it } from "vitest";
import { LEASE_MS, processReceipt } from "../../src/consumers/process";
import { account, eventually } from "../support/deliveries";
import { hangNextRun, testEnv } from "./support/handlers";
import { attemptRows, receiptRow, seedReceipt } from "./support/processing";

describe("leases", () => {
  it("lets exactly one of many concurrent consumers run a receipt, and applies its effect once", async () => {
    const receiptId = await seedReceipt({ source: "proc-handler", payload: { account: "acct_race", amount: 5 } });
    const now = Date.now();
    const outcomes = await Promise.all(Array.from({ length: 10 }, () => processReceipt(testEnv, receiptId, now)));

    expect(outcomes.filter((outcome) => outcome.kind === "done")).toEqual([{ kind: "done", status: "processed" }]);
    // The losers are told to come back once the winner's lease would have expired; by then it is processed.
    expect(outcomes.filter((outcome) => outcome.kind === "retry")).toHaveLength(9);
    expect((await account("acct_race"))?.credits).toBe(5);
    expect(await attemptRows(receiptId)).toHaveLength(1);
    expect(await processReceipt(testEnv, receiptId, now + LEASE_MS + 1)).toEqual({ kind: "done", status: "processed" });
    expect((await account("acct_race"))?.credits).toBe(5);
  });

  it("retries the work of a consumer that stopped mid-attempt once its lease expires, and applies it once", async () => {
    const eventKey = "evt_lease_takeover";
    const receiptId = await seedReceipt({ source: "proc-handler", eventKey, payload: { account: "acct_takeover", amount: 7 } });
    const release = hangNextRun(eventKey);
    const t0 = Date.now();

    // The first consumer leases the receipt and stops before its commit, as if its isolate died.
    const stalled = processReceipt(testEnv, receiptId, t0);
    await eventually(async () => ((await receiptRow(receiptId)).status === "processing" ? true : undefined));
    expect((await receiptRow(receiptId)).leaseUntil).toBe(t0 + LEASE_MS);

    // While the lease holds, nobody else runs it.
    const whileLeased = await processReceipt(testEnv, receiptId, t0 + LEASE_MS - 1000);
    expect(whileLeased).toEqual({ kind: "retry", delaySeconds: 2 });
    expect(await attemptRows(receiptId)).toHaveLength(1);

    // After it expires, five consumers race for the takeover: one wins and applies the effect.
    const takeovers = await Promise.all(Array.from({ length: 5 }, () => processReceipt(testEnv, receiptId, t0 + LEASE_MS + 1)));
    expect(takeovers.filter((outcome) => outcome.kind === "done")).toEqual([{ kind: "done", status: "processed" }]);
    expect((await account("acct_takeover"))?.credits).toBe(7);
    const afterTakeover = await attemptRows(receiptId);
    expect(afterTakeover.map(({ attemptNumber, outcome }) => ({ attemptNumber, outcome }))).toEqual([
      { attemptNumber: 1, outcome: "unknown" },
      { attemptNumber: 2, outcome: "processed" },
    ]);
    expect(afterTakeover[0]!.error).toBe("lease expired before the attempt finished");
    expect(await receiptRow(receiptId)).toMatchObject({ status: "processed", attempts: 2, leaseUntil: null });

    // The first consumer was only slow: when it resumes, its commit finds the processed key and applies nothing,
    // and it cannot move the receipt its successor finished.
    release();
    expect(await stalled).toEqual({ kind: "done", status: "processed" });
    expect((await account("acct_takeover"))?.credits).toBe(7);
    expect(await receiptRow(receiptId)).toMatchObject({ status: "processed", attempts: 2 });
    expect((await attemptRows(receiptId)).map((attempt) => attempt.outcome)).toEqual(["duplicate", "processed"]);
  });

  it("keeps a slow consumer's late failure from resetting a receipt its successor is running", async () => {
    const eventKey = "evt_lease_late_failure";
    const receiptId = await seedReceipt({ source: "proc-handler", eventKey, payload: { account: "acct_late", amount: 1, fail: "transient" } });
    const release = hangNextRun(eventKey);
    const t0 = Date.now();
    const stalled = processReceipt(testEnv, receiptId, t0);
    await eventually(async () => ((await receiptRow(receiptId)).status === "processing" ? true : undefined));

    // The successor takes over and fails too; its retry is scheduled.
    expect((await processReceipt(testEnv, receiptId, t0 + LEASE_MS + 1)).kind).toBe("retry");
    const scheduled = await receiptRow(receiptId);
    expect(scheduled).toMatchObject({ status: "pending", attempts: 2 });

    // The stale consumer's failure arrives last: it is recorded on its own attempt, and changes nothing else.
    release();
    expect((await stalled).kind).toBe("retry");
    expect(await receiptRow(receiptId)).toEqual(scheduled);
    expect((await attemptRows(receiptId)).map((attempt) => attempt.outcome)).toEqual(["retry", "retry"]);
  });
});
