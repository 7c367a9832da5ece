import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { processBatch } from "../../src/consumers/receipts/process";
import { ADMIN, adminPost } from "../admin/support";
import { receiptRow } from "../consumers/support/processing";
import { eventually } from "../support/deliveries";
import { deadThenTwoBehind, lane, sendCredit, setLane } from "./gate-support";

/**
 * `ordered_by` per route (docs/routing.md "Ordering"), through the real pipeline: signed deliveries posted to
 * /webhooks/<source>, relayed, consumed from the queue and forwarded to a lane of the Node stand-in
 * (test/setup/global/forward-standin.ts), which records every request in arrival order. A body carrying the lane's
 * marker follows the lane's script (fails, then succeeds; or is refused for good). Sources:
 * test/fixtures/sources/ordering.json.
 */

/** Receipt ids in the order their requests reached the lane (a retried one once per request). */
async function arrivals(name: string): Promise<string[]> {
  return (await lane(name)).map((request) => request.headers["idempotency-key"]!);
}

async function whenAll(receiptIds: readonly string[], status: string, timeoutMs = 60_000): Promise<void> {
  await eventually(
    async () => (await Promise.all(receiptIds.map(receiptRow))).every((row) => row.status === status) || undefined,
    timeoutMs,
    `every receipt ${status}`,
  );
}

/** Waiting for its turn: pending, due again later, no attempt spent. */
async function whenHeld(receiptIds: readonly string[]): Promise<void> {
  await eventually(
    async () =>
      (await Promise.all(receiptIds.map(receiptRow))).every(
        (row) => row.status === "pending" && row.nextAttemptAt !== null && row.attempts === 0,
      ) || undefined,
    30_000,
    "every receipt held",
  );
}

const ascending = (ids: readonly string[]) => [...ids].sort();

describe("ordered_by = subject", () => {
  it("delivers each subject's events one at a time in received order, a failing one retried before its later ones, subjects interleaved", {
    timeout: 120_000,
  }, async () => {
    // Three subjects' events sent side by side, each subject's one after another; the first event of acct_o1 fails
    // twice (500) before it succeeds, while its later events arrive behind it.
    const subjects = ["acct_o1", "acct_o2", "acct_o3"];
    const sent = await Promise.all(
      subjects.map(async (account) => {
        const ids: string[] = [];
        for (let n = 0; n < 4; n++)
          ids.push(
            await sendCredit("order-subject", {
              account,
              amount: n,
              ...(account === "acct_o1" && n === 0 ? { note: "retry-me" } : {}),
            }),
          );
        return ids;
      }),
    );
    const noSubject = await sendCredit("order-subject", { amount: 9 });
    const all = [...sent.flat(), noSubject];
    await whenAll(all, "processed", 90_000);

    const arrived = await arrivals("order-subject");
    for (const [index, ids] of sent.entries()) {
      const ofSubject = arrived.filter((id) => ids.includes(id));
      // Never overtaken: every request of an earlier event (its retries included) before any of a later one.
      expect(ofSubject, subjects[index]).toEqual(ascending(ofSubject));
      expect(new Set(ofSubject)).toEqual(new Set(ids));
    }
    const [first, ...later] = sent[0]!;
    expect(arrived.filter((id) => id === first)).toHaveLength(3);
    expect((await receiptRow(first!)).attempts).toBe(3);
    // Waiting spent no attempt: each later event, and every other subject's, went once.
    for (const id of [...later, ...sent[1]!, ...sent[2]!, noSubject]) expect((await receiptRow(id)).attempts).toBe(1);
    expect(arrived.filter((id) => id === noSubject)).toHaveLength(1);
  });
});

describe("ordered_by = body path, a dead delivery", () => {
  it("blocks its ordering value's later deliveries (no attempt spent) until replayed, or until dismissed; other values and events without one go on", {
    timeout: 120_000,
  }, async () => {
    const replayedLater = "acct_d1";
    const dismissedLater = "acct_d2";
    const deadReplayed = await sendCredit("order-dead", { account: replayedLater, note: "refuse-me" });
    const deadDismissed = await sendCredit("order-dead", { account: dismissedLater, note: "refuse-me" });
    await whenAll([deadReplayed, deadDismissed], "dead");

    const behindReplayed = [
      await sendCredit("order-dead", { account: replayedLater, amount: 1 }),
      await sendCredit("order-dead", { account: replayedLater, amount: 2 }),
    ];
    const behindDismissed = await sendCredit("order-dead", { account: dismissedLater, amount: 1 });
    const otherValue = await sendCredit("order-dead", { account: "acct_d3", amount: 1 });
    const noValue = await sendCredit("order-dead", { amount: 1 });
    await whenAll([otherValue, noValue], "processed");
    await whenHeld([...behindReplayed, behindDismissed]);

    // Long past their due time, they still wait: the dead ones have not moved. (Each look is past the due time the
    // one before it set.)
    let clock = Date.now();
    const later = () => {
      clock += 10 * 60_000;
      return clock;
    };
    const stillHeld = await processBatch(env, [...behindReplayed, behindDismissed], later());
    for (const id of [...behindReplayed, behindDismissed]) {
      expect(stillHeld.get(id)).toMatchObject({ kind: "retry" });
      expect(await receiptRow(id)).toMatchObject({ status: "pending", attempts: 0 });
    }
    const waited = new Set([...behindReplayed, behindDismissed]);
    expect((await arrivals("order-dead")).filter((id) => waited.has(id))).toEqual([]);

    // Dismissing a dead letter lets its value's next delivery go.
    expect((await adminPost("/admin/api/dead/dismiss", { receiptIds: [deadDismissed] }, ADMIN)).status).toBe(200);
    expect((await processBatch(env, [behindDismissed], later())).get(behindDismissed)).toMatchObject({ kind: "done" });
    expect(await receiptRow(behindDismissed)).toMatchObject({ status: "processed", attempts: 1 });

    // Replaying one (its destination fixed) sends it first, then the ones behind it, in received order.
    await setLane("order-dead", 204);
    expect((await adminPost(`/admin/api/receipts/${deadReplayed}/replay`, {}, ADMIN)).status).toBe(202);
    await whenAll([deadReplayed], "processed");
    await processBatch(env, behindReplayed, later());
    await processBatch(env, behindReplayed, later());
    for (const id of behindReplayed) expect(await receiptRow(id)).toMatchObject({ status: "processed", attempts: 1 });
    const ofValue = (await arrivals("order-dead")).filter((id) => id === deadReplayed || behindReplayed.includes(id));
    expect(ofValue).toEqual([deadReplayed, deadReplayed, ...behindReplayed]);
  });

  it('with on_dead = "skip" does not hold the later ones back', { timeout: 60_000 }, async () => {
    const { behind: after } = await deadThenTwoBehind("order-skip", "acct_s1", "refuse-me", (dead) =>
      whenAll([dead], "dead"),
    );
    await whenAll(after, "processed");
    expect((await arrivals("order-skip")).filter((id) => after.includes(id))).toEqual(after);
  });
});
