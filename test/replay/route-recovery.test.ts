import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { processReceipt } from "../../src/consumers/receipts/process";
import { adminGet } from "../admin/support";
import { receiptRow } from "../consumers/support/processing";
import { keysOf, lane, sendCredit, setLane } from "../routing/gate-support";
import { eventually } from "../support/deliveries";

/**
 * A route's recovery (docs/operating.md, "Recovery when a route's breaker closes"), through the real pipeline:
 * rj-recover (test/fixtures/sources/replay-jobs.json) forwards to a lane of the Node stand-in, dead-letters at the
 * first failure (max_retries 0), opens its breaker after 2 failures, orders by account, and has recover = "auto".
 */

const SOURCE = "rj-recover";

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

    // The destination is back; the probe interval later, one probe goes through and closes the breaker.
    await setLane("rj-recover", 204);
    expect(await processReceipt(env, c1, Date.now() + 3_600_000 + 60_000)).toEqual({
      kind: "done",
      status: "processed",
    });
    await until([a1, b1, c1], (row) => row.status === "processed", "the dead deliveries re-driven and processed");
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
  });
});
