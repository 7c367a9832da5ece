import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { outboundIdempotencyKey } from "../../src/consumers/attempt/external-calls";
import { LEASE_MS } from "../../src/consumers/lease/lease";
import { processReceipt } from "../../src/consumers/receipts/process";
import { replayReceipt } from "../../src/replay/replay-receipts";
import { account, eventually } from "../support/deliveries";
import { lossyQueue } from "../support/failpoints";
import { hangNextRun, testEnv } from "./support/handlers";
import { attemptRows, receiptRow, seedReceipt, standinOrigin, standinRequests } from "./support/processing";

/** An event whose handler calls an external API (which takes the lease) and then credits the account once. */
async function seedExternal(eventKey: string, accountId: string, script = "200"): Promise<string> {
  return seedReceipt({
    source: "proc-external",
    eventKey,
    payload: { account: accountId, callUrl: `${standinOrigin()}/script/${script}`, timeoutMs: 1500 },
  });
}

describe("concurrent consumers of a D1-only handler (no lease)", () => {
  it("lets many consumers run one receipt at once and commits exactly one effect; the rest record a duplicate", async () => {
    const receiptId = await seedReceipt({ source: "proc-handler", payload: { account: "acct_race", amount: 5 } });
    const now = Date.now();
    const outcomes = await Promise.all(Array.from({ length: 10 }, () => processReceipt(testEnv, receiptId, now)));

    expect(outcomes.filter((outcome) => outcome.kind === "done" && outcome.status === "processed")).toHaveLength(1);
    expect(outcomes.filter((outcome) => outcome.kind === "done" && outcome.status === "duplicate")).toHaveLength(9);
    expect((await account("acct_race"))?.credits).toBe(5);
    const attempts = await attemptRows(receiptId);
    expect(attempts.filter((attempt) => attempt.outcome === "processed")).toHaveLength(1);
    expect(attempts.filter((attempt) => attempt.outcome === "duplicate")).toHaveLength(9);
    expect(new Set(attempts.map((attempt) => attempt.attemptNumber)).size).toBe(10);
    expect(await receiptRow(receiptId)).toMatchObject({ status: "processed", attempts: 1, leaseUntil: null });

    // A later message for it finds it finished: nothing runs.
    expect(await processReceipt(testEnv, receiptId, now + LEASE_MS + 1)).toEqual({ kind: "done", status: "processed" });
    expect((await account("acct_race"))?.credits).toBe(5);
    expect(await attemptRows(receiptId)).toHaveLength(10);
  });
});

describe("leases, for attempts that reach outside D1", () => {
  it("keeps others out while the lease holds, lets one consumer take over after it expires, and applies once", async () => {
    const eventKey = "evt_lease_takeover";
    const receiptId = await seedExternal(eventKey, "acct_takeover");
    const release = hangNextRun(eventKey);
    const t0 = Date.now();

    // The first consumer's external call takes the lease; it stops before its commit, as if its isolate died.
    const stalled = processReceipt(testEnv, receiptId, t0);
    await eventually(async () => ((await receiptRow(receiptId)).status === "processing" ? true : undefined));
    expect((await receiptRow(receiptId)).leaseUntil).toBe(t0 + LEASE_MS);

    // While the lease holds, nobody else runs it.
    const whileLeased = await processReceipt(testEnv, receiptId, t0 + LEASE_MS - 1000);
    expect(whileLeased).toEqual({ kind: "retry", delaySeconds: 2 });
    expect(await standinRequests(outboundIdempotencyKey(receiptId, "notify"))).toHaveLength(1);

    // After it expires, five consumers race for the takeover: one takes the lease and applies the effect, the
    // others find the lease taken, call nothing and record nothing. The attempt whose lease ran out is on record,
    // its outcome unknown for now, and counted.
    const takeovers = await Promise.all(
      Array.from({ length: 5 }, () => processReceipt(testEnv, receiptId, t0 + LEASE_MS + 1)),
    );
    expect(takeovers.filter((outcome) => outcome.kind === "done")).toEqual([{ kind: "done", status: "processed" }]);
    expect(takeovers.filter((outcome) => outcome.kind === "retry")).toHaveLength(4);
    expect((await account("acct_takeover"))?.credits).toBe(1);
    expect(await standinRequests(outboundIdempotencyKey(receiptId, "notify"))).toHaveLength(2);
    expect((await attemptRows(receiptId)).map(({ attemptNumber, outcome }) => ({ attemptNumber, outcome }))).toEqual([
      { attemptNumber: 1, outcome: "unknown" },
      { attemptNumber: 2, outcome: "processed" },
    ]);

    // The first consumer was only slow: when it resumes, its commit finds the receipt committed and applies
    // nothing, and it cannot move the receipt its successor finished. Its real outcome replaces the presumed one.
    release();
    expect(await stalled).toEqual({ kind: "done", status: "duplicate" });
    expect((await account("acct_takeover"))?.credits).toBe(1);
    expect(await receiptRow(receiptId)).toMatchObject({ status: "processed", attempts: 2 });
    expect((await attemptRows(receiptId)).map((attempt) => attempt.outcome)).toEqual(["duplicate", "processed"]);
  });

  it("keeps a slow consumer's late failure from resetting a receipt its successor is running", async () => {
    const eventKey = "evt_lease_late_failure";
    const receiptId = await seedReceipt({
      source: "proc-external",
      eventKey,
      payload: { account: "acct_late", callUrl: `${standinOrigin()}/script/200`, timeoutMs: 1500, failAfterCall: true },
    });
    const release = hangNextRun(eventKey);
    const t0 = Date.now();
    const stalled = processReceipt(testEnv, receiptId, t0);
    await eventually(async () => ((await receiptRow(receiptId)).status === "processing" ? true : undefined));

    // The successor takes over once the lease has expired, and fails too; its retry is scheduled.
    expect((await processReceipt(testEnv, receiptId, t0 + LEASE_MS + 1)).kind).toBe("retry");
    const scheduled = await receiptRow(receiptId);
    // Two attempts have run: the stalled one was counted when it took its lease.
    expect(scheduled).toMatchObject({ status: "pending", attempts: 2 });

    // The stale consumer's failure arrives last: it is recorded on its own attempt, and changes nothing else.
    release();
    expect((await stalled).kind).toBe("retry");
    expect(await receiptRow(receiptId)).toEqual(scheduled);
    expect((await attemptRows(receiptId)).map((attempt) => [attempt.attemptNumber, attempt.outcome])).toEqual([
      [1, "retry"],
      [2, "retry"],
    ]);
    expect(await account("acct_late")).toBeNull();
  });

  it("keeps a stalled consumer's late dead verdict from killing a replay that a new consumer is running", async () => {
    const eventKey = "evt_lease_replay_fence";
    const receiptId = await seedExternal(eventKey, "acct_replay_fence");
    const leaseOf = async () =>
      (await env.DB.prepare("SELECT lease_generation AS generation FROM receipts WHERE id = ?")
        .bind(receiptId)
        .first<{ generation: number }>())!.generation;
    const t0 = Date.now();

    // Consumer A takes the lease (generation 1) with its external call, then stalls past the lease; when it
    // wakes it will fail permanently, a "dead" verdict fenced on the generation it holds.
    const wakeStalled = hangNextRun(eventKey, "the stalled consumer's failure");
    const stalled = processReceipt(testEnv, receiptId, t0);
    await eventually(async () => ((await receiptRow(receiptId)).status === "processing" ? true : undefined));
    expect(await leaseOf()).toBe(1);

    // The lease runs out: a re-drive gives the receipt to consumer B (generation 2), which fails and leaves it dead.
    hangNextRun(eventKey, "the successor's failure")();
    expect(await processReceipt(testEnv, receiptId, t0 + LEASE_MS + 1)).toEqual({ kind: "done", status: "dead" });
    expect(await leaseOf()).toBe(2);

    // An operator replays it. The queue message is dropped so that this test plays the consumer itself (C).
    const replayedAt = t0 + LEASE_MS + 2;
    expect(await replayReceipt({ ...testEnv, WORK_QUEUE: lossyQueue() }, receiptId, replayedAt)).toMatchObject({
      kind: "replayed",
      previousStatus: "dead",
    });
    const finishReplay = hangNextRun(eventKey);
    const replayRun = processReceipt(testEnv, receiptId, replayedAt);
    await eventually(async () => ((await receiptRow(receiptId)).status === "processing" ? true : undefined));
    const whileReplaying = await receiptRow(receiptId);

    // A wakes and fails. Its fenced update names generation 1, which nobody holds any more: the replay runs on.
    wakeStalled();
    await stalled;
    expect(await receiptRow(receiptId)).toEqual(whileReplaying);
    expect(whileReplaying).toMatchObject({ status: "processing", leaseUntil: replayedAt + LEASE_MS, replayCount: 1 });
    // The replay never hands an earlier generation out again: C holds 3, not A's 1.
    expect(await leaseOf()).toBe(3);

    finishReplay();
    expect(await replayRun).toEqual({ kind: "done", status: "processed" });
    expect(await receiptRow(receiptId)).toMatchObject({ status: "processed", replayCount: 1, provenance: "live" });
    expect((await account("acct_replay_fence"))?.credits).toBe(1);
    expect(await standinRequests(outboundIdempotencyKey(receiptId, "notify"))).toHaveLength(3);
  });
});
