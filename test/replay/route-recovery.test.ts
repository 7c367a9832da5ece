import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { processReceipt } from "../../src/consumers/receipts/process";
import type { Issue } from "../../src/monitor/issues/types";
import {
  RECOVERY_START_GRACE_MS,
  type RecoveryProgress,
  recoveryHolds,
  recoveryStartingMessage,
} from "../../src/reconcile/recovery-issues";
import { adminGet } from "../admin/support";
import { receiptRow } from "../consumers/support/processing";
import { issue } from "../monitor/issue-support";
import { runCron, withOnlySources } from "../reconcile/support";
import { keysOf, lane, sendCredit, setLane } from "../routing/gate-support";
import { eventually } from "../support/deliveries";

/**
 * A route's recovery (docs/operating.md, "Recovery when a route's breaker closes"), through the real pipeline:
 * rj-recover (test/fixtures/sources/replay-jobs.json) forwards to a lane of the Node stand-in, dead-letters at the
 * first failure (max_retries 0), opens its breaker after 2 failures, orders by account, and has recover = "auto".
 */

const SOURCE = "rj-recover";
const ISSUE = "breaker-open:rj-recover:flaky";

async function until(
  receiptIds: readonly string[],
  ready: (row: Awaited<ReturnType<typeof receiptRow>>) => boolean,
  what: string,
) {
  await eventually(
    async () => ((await Promise.all(receiptIds.map(receiptRow))).every(ready) ? true : undefined),
    60_000,
    what,
  );
}

describe('recover = "auto"', () => {
  it("when the breaker closes, the deliveries that died while the destination was down are each delivered once, in order", {
    timeout: 180_000,
  }, async () => {
    await setLane("rj-recover", 503);
    const a1 = await sendCredit(SOURCE, { account: "acct_a", amount: 1 });
    await until([a1], (row) => row.status === "dead", "a1 dead");
    const b1 = await sendCredit(SOURCE, { account: "acct_b", amount: 1 });
    await until([b1], (row) => row.status === "dead", "b1 dead");
    // Open now: a later event of acct_a waits behind its dead predecessor, one of acct_c for the breaker.
    const a2 = await sendCredit(SOURCE, { account: "acct_a", amount: 2 });
    const c1 = await sendCredit(SOURCE, { account: "acct_c", amount: 1 });
    await until(
      [a2, c1],
      (row) => row.status === "pending" && row.nextAttemptAt !== null && row.attempts === 0,
      "held",
    );
    expect(await issue(ISSUE)).toMatchObject({ state: "open", episodes: 1 });

    // The destination is back; the probe interval later, one probe goes through and closes the breaker.
    await setLane("rj-recover", 204);
    expect(await processReceipt(env, c1, Date.now() + 3_600_000 + 60_000)).toEqual({
      kind: "done",
      status: "processed",
    });
    await until([a1, b1, c1], (row) => row.status === "processed", "the dead deliveries re-driven and processed");
    // The breaker closed, but the issue is not over until its recovery is: the breaker's report does not resolve it.
    expect(await issue(ISSUE)).toMatchObject({ state: "open", episodes: 1 });

    // acct_a's later event waited behind its dead predecessor; once that one is delivered it goes when it comes due.
    const { nextAttemptAt } = await receiptRow(a2);
    expect(await processReceipt(env, a2, nextAttemptAt!)).toEqual({ kind: "done", status: "processed" });

    const delivered = keysOf((await lane("rj-recover")).filter((request) => request.answer === 204));
    for (const receiptId of [a1, b1, a2, c1]) expect(delivered.filter((key) => key === receiptId)).toHaveLength(1);
    expect(delivered.indexOf(a1)).toBeLessThan(delivered.indexOf(a2));
    for (const receiptId of [a1, b1]) expect(await receiptRow(receiptId)).toMatchObject({ replayCount: 1 });

    // Visible: the route's view names the job, and the job says what it re-drove.
    const view = await (await adminGet(`/admin/api/sources/${SOURCE}/routes/flaky`)).json<{
      gate: { breakerOpen: boolean; recovery: { jobKey: string } | null };
    }>();
    expect(view.gate.breakerOpen).toBe(false);
    const jobKey = view.gate.recovery!.jobKey;
    const job = await (await adminGet(`/admin/api/replays/${jobKey}`)).json<{ job: Record<string, unknown> }>();
    expect(job.job).toMatchObject({ origin: "recovery", source: SOURCE, route: "flaky", state: "done", replayed: 2 });

    // The cron reads the job done: the issue resolves, in the same episode, saying what was re-driven.
    await runCron(Date.now(), withOnlySources(SOURCE));
    const resolved = await issue(ISSUE);
    const recovered = `Recovered: job ${jobKey} re-drove 2 dead deliveries`;
    expect(resolved).toMatchObject({ state: "resolved", resolvedBy: "receiver", episodes: 1 });
    expect(resolved!.message).toContain(recovered);
    expect(resolved!.history.at(-1)).toMatchObject({ event: "resolved" });
    expect(resolved!.history.at(-1)!.detail).toContain(recovered);
    expect(resolved!.history.filter((entry) => entry.event === "reopened")).toEqual([]);
  });
});

describe("a recovery holds its route's breaker-open issue (recoveryHolds)", () => {
  const openedAt = 1_000_000;
  const open: Issue = {
    issueKey: "breaker-open:s:r",
    kind: "breaker-open",
    source: "s",
    route: "r",
    store: null,
    state: "open",
    severity: "critical",
    message: "The circuit breaker of route r is open.",
    openedAt,
    updatedAt: openedAt,
    acknowledgedAt: null,
    acknowledgeNote: null,
    resolvedAt: null,
    resolvedBy: null,
    episodes: 1,
    notifiedSeverity: "critical",
    lastNoticeAt: openedAt,
  };
  const recovering = new Set(["s/r"]);
  const job = (state: "running" | "done", createdAt = openedAt + 5): RecoveryProgress => ({
    source: "s",
    route: "r",
    jobKey: "recover-1",
    state,
    scanned: 40,
    replayed: 37,
    expired: 0,
    createdAt,
  });
  const now = openedAt + 60_000;

  it("keeps the issue while its job runs, naming it; resolves with the count when done", () => {
    const running = recoveryHolds([open], [], recovering, [job("running")], now);
    expect(running.resolutions.size).toBe(0);
    expect(running.firing).toEqual([
      expect.objectContaining({ kind: "breaker-open", source: "s", route: "r", severity: "critical" }),
    ]);
    expect(running.firing[0]!.message).toContain("recovering: job recover-1 re-drove 37 dead deliveries so far");
    const done = recoveryHolds([open], [], recovering, [job("done")], now);
    expect(done.firing).toEqual([]);
    expect(done.resolutions.get(open.issueKey)).toBe(
      "Recovered: job recover-1 re-drove 37 dead deliveries (40 receipts scanned).",
    );
  });

  it("holds it unchanged without a D1 read, and while the job is not there yet; never for a route without recover", () => {
    expect(recoveryHolds([open], [], recovering, null, now).firing.map((c) => c.message)).toEqual([open.message]);
    // An earlier episode's job is not this one's.
    const starting = recoveryHolds([open], [], recovering, [job("done", openedAt - 1)], now);
    expect(starting.firing.map((c) => c.message)).toEqual([recoveryStartingMessage("r")]);
    const waiting = { ...open, message: recoveryStartingMessage("r"), updatedAt: now };
    expect(recoveryHolds([waiting], [], recovering, [], now + 1).firing).toHaveLength(1);
    const given = recoveryHolds([waiting], [], recovering, [], now + RECOVERY_START_GRACE_MS);
    expect(given.firing).toEqual([]);
    expect(given.resolutions.get(open.issueKey)).toContain("no recovery job started");
    expect(recoveryHolds([open], [], new Set(), [job("running")], now)).toEqual({ firing: [], resolutions: new Map() });
    // The breaker open again speaks for itself.
    const firing = [
      {
        kind: "breaker-open" as const,
        source: "s",
        route: "r",
        store: null,
        severity: "critical" as const,
        message: "open",
      },
    ];
    expect(recoveryHolds([open], firing, recovering, [job("running")], now).firing).toEqual([]);
  });
});
