import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { processDeliveries } from "../../src/consumers/deliveries/deliveries";
import { processBatch } from "../../src/consumers/receipts/process";
import { ADMIN, adminPost } from "../admin/support";
import { receiptRow } from "../consumers/support/processing";
import { eventually } from "../support/deliveries";
import { type DeliveryRow, deadThenTwoBehind, deliveryRow, keysOf, lane, sendCredit, setLane } from "./gate-support";

/**
 * `ordered_by` on the routes of a source with several (docs/routing.md "Ordering"): each route keeps its own order,
 * whether its delivery of an event is the one the receipt row carries (the first route) or a further one (its own
 * `deliveries` row). Through the real route and queue, forwarding to lanes of the Node stand-in
 * (test/setup/global/forward-standin.ts), which record every request in arrival order under the Idempotency-Key
 * `<receipt>:<route>`. Sources: order-routes, order-routes-dead and order-routes-skip in
 * test/fixtures/sources/ordering.json.
 */

/** Receipt ids in the order their requests to `route` reached the lane (a retried one once per request). */
async function arrivals(laneName: string, route: string): Promise<string[]> {
  return keysOf(await lane(laneName)).flatMap((key) => (key?.endsWith(`:${route}`) ? [key.split(":")[0]!] : []));
}

async function whenEvery(
  receiptIds: readonly string[],
  route: string,
  what: string,
  test: (row: DeliveryRow) => boolean,
): Promise<void> {
  await eventually(
    async () =>
      (await Promise.all(receiptIds.map((receiptId) => deliveryRow(receiptId, route)))).every(
        (row) => row !== null && test(row),
      ) || undefined,
    90_000,
    what,
  );
}

async function whenReceipts(receiptIds: readonly string[], status: string): Promise<void> {
  await eventually(
    async () => (await Promise.all(receiptIds.map(receiptRow))).every((row) => row.status === status) || undefined,
    90_000,
    `every receipt ${status}`,
  );
}

/** Waiting for its turn: pending, due again later, no attempt spent. */
const held = (row: { status: string; nextAttemptAt: number | null; attempts: number }) =>
  row.status === "pending" && row.nextAttemptAt !== null && row.attempts === 0;
const ascending = (ids: readonly string[]) => [...ids].sort();

/** The receipt's own (crm) delivery processed, its ledger delivery dead. */
async function ledgerDead(receiptId: string): Promise<void> {
  await whenReceipts([receiptId], "processed");
  await whenEvery([receiptId], "ledger", "ledger delivery dead", (row) => row.status === "dead");
}

/** Each look is ten minutes past the one before: past any due time a hold set. */
function steppingClock(): () => number {
  let clock = Date.now();
  return () => {
    clock += 10 * 60_000;
    return clock;
  };
}

describe("ordered_by on both routes of a source", () => {
  it("keeps each subject's order on each route, a retried delivery on either route before its later ones", {
    timeout: 150_000,
  }, async () => {
    // Three subjects' events sent side by side, each subject's one after another. acct_r1's first event fails twice
    // on crm (the receipt's own route); acct_r2's first fails twice on ledger (a further delivery).
    const subjects = ["acct_r1", "acct_r2", "acct_r3"];
    const sent = await Promise.all(
      subjects.map(async (account) => {
        const ids: string[] = [];
        for (let n = 0; n < 4; n++) {
          const note =
            n > 0
              ? {}
              : account === "acct_r1"
                ? { note: "fail-crm" }
                : account === "acct_r2"
                  ? { note: "fail-ledger" }
                  : {};
          ids.push(await sendCredit("order-routes", { account, amount: n, ...note }));
        }
        return ids;
      }),
    );
    const all = sent.flat();
    await whenReceipts(all, "processed");
    await whenEvery(all, "ledger", "every ledger delivery processed", (row) => row.status === "processed");

    for (const [route, laneName] of [
      ["crm", "or-crm"],
      ["ledger", "or-ledger"],
    ] as const) {
      const arrived = await arrivals(laneName, route);
      for (const [index, ids] of sent.entries()) {
        const ofSubject = arrived.filter((id) => ids.includes(id));
        // Never overtaken on this route: every request of an earlier event (its retries too) before a later one's.
        expect(ofSubject, `${route} ${subjects[index]}`).toEqual(ascending(ofSubject));
        expect(new Set(ofSubject)).toEqual(new Set(ids));
      }
    }
    const [crmRetried, ...crmLater] = sent[0]!;
    const [ledgerRetried, ...ledgerLater] = sent[1]!;
    expect((await arrivals("or-crm", "crm")).filter((id) => id === crmRetried)).toHaveLength(3);
    expect((await receiptRow(crmRetried!)).attempts).toBe(3);
    expect((await arrivals("or-ledger", "ledger")).filter((id) => id === ledgerRetried)).toHaveLength(3);
    expect((await deliveryRow(ledgerRetried!, "ledger"))?.attempts).toBe(3);
    // Waiting spent no attempt, on either route.
    for (const id of all.filter((id) => id !== crmRetried)) expect((await receiptRow(id)).attempts, id).toBe(1);
    for (const id of all.filter((id) => id !== ledgerRetried))
      expect((await deliveryRow(id, "ledger"))?.attempts, id).toBe(1);
    expect(crmLater.length + ledgerLater.length).toBe(6);
  });
});

describe("a dead delivery on one route of several", () => {
  it("holds that route's later deliveries of its value until replayed, and never the other route's", {
    timeout: 150_000,
  }, async () => {
    const { dead, behind } = await deadThenTwoBehind("order-routes-dead", "acct_rd1", "refuse-ledger", ledgerDead);
    const otherValue = await sendCredit("order-routes-dead", { account: "acct_rd3", amount: 1 });
    // crm takes them at once; ledger holds them, no attempt spent, while another value goes through.
    await whenReceipts([...behind, otherValue], "processed");
    await whenEvery(
      [otherValue],
      "ledger",
      "other value's ledger delivery processed",
      (row) => row.status === "processed",
    );
    await whenEvery(behind, "ledger", "ledger deliveries held", held);
    for (const id of behind) expect((await receiptRow(id)).attempts).toBe(1);

    // Long past their due time, they still wait: the dead one has not moved.
    const later = steppingClock();
    const stillHeld = await processDeliveries(env, "ledger", behind, later());
    for (const id of behind) {
      expect(stillHeld.get(id)).toMatchObject({ kind: "retry" });
      expect(await deliveryRow(id, "ledger")).toMatchObject({ status: "pending", attempts: 0 });
    }
    expect((await arrivals("ord-ledger", "ledger")).filter((id) => behind.includes(id))).toEqual([]);

    // Replaying the dead delivery (its destination fixed) sends it first, then the ones behind it, in received order.
    await setLane("ord-ledger", 204);
    expect((await adminPost(`/admin/api/receipts/${dead}/replay?route=ledger`, {}, ADMIN)).status).toBe(202);
    await whenEvery([dead], "ledger", "replayed delivery processed", (row) => row.status === "processed");
    await processDeliveries(env, "ledger", behind, later());
    await processDeliveries(env, "ledger", behind, later());
    for (const id of behind)
      expect(await deliveryRow(id, "ledger")).toMatchObject({ status: "processed", attempts: 1 });
    const ofValue = (await arrivals("ord-ledger", "ledger")).filter((id) => id === dead || behind.includes(id));
    expect(ofValue).toEqual([dead, dead, ...behind]);
    expect((await arrivals("ord-crm", "crm")).filter((id) => id === dead || behind.includes(id))).toEqual([
      dead,
      ...behind,
    ]);
  });

  it("releases that route's later deliveries, in received order, once the dead further delivery is dismissed by route", {
    timeout: 150_000,
  }, async () => {
    // The lane's own rule again (the replay case above set it to accept everything): the marked event is refused.
    await setLane("ord-ledger", 0);
    const { dead, behind } = await deadThenTwoBehind("order-routes-dead", "acct_rd4", "refuse-ledger", ledgerDead);
    await whenReceipts(behind, "processed");
    await whenEvery(behind, "ledger", "ledger deliveries held", held);

    const later = steppingClock();
    const stillHeld = await processDeliveries(env, "ledger", behind, later());
    for (const id of behind) expect(stillHeld.get(id)).toMatchObject({ kind: "retry" });

    // Dismissed by route: the further delivery, not the receipt (its own crm delivery was processed).
    const dismissed = await adminPost("/admin/api/dead/dismiss", { receiptIds: [dead], route: "ledger" }, ADMIN);
    expect(dismissed.status).toBe(200);
    expect(await dismissed.json()).toEqual({ changed: [dead], unchanged: [], routeNotFound: [] });
    expect(await deliveryRow(dead, "ledger")).toMatchObject({ status: "dismissed" });
    expect(await receiptRow(dead)).toMatchObject({ status: "processed" });

    await processDeliveries(env, "ledger", behind, later());
    await processDeliveries(env, "ledger", behind, later());
    for (const id of behind)
      expect(await deliveryRow(id, "ledger")).toMatchObject({ status: "processed", attempts: 1 });
    // The dismissed one is not sent again; the later ones arrive after it, in received order.
    const ofValue = (await arrivals("ord-ledger", "ledger")).filter((id) => id === dead || behind.includes(id));
    expect(ofValue).toEqual([dead, ...behind]);
    expect(await deliveryRow(dead, "ledger")).toMatchObject({ status: "dismissed", attempts: 1 });
  });

  it("holds the first route's later deliveries of its value until dismissed, and never the other route's", {
    timeout: 150_000,
  }, async () => {
    const account = "acct_rd2";
    const dead = await sendCredit("order-routes-dead", { account, note: "refuse-crm" });
    await whenReceipts([dead], "dead");
    const behind = await sendCredit("order-routes-dead", { account, amount: 1 });
    await eventually(async () => held(await receiptRow(behind)) || undefined, 30_000, "crm delivery held");
    // The ledger, in its own order, takes it at once: the CRM's dead letter holds only the CRM.
    await whenEvery([behind], "ledger", "ledger delivery processed", (row) => row.status === "processed");

    const later = steppingClock();
    expect((await processBatch(env, [behind], later())).get(behind)).toMatchObject({ kind: "retry" });
    expect(await receiptRow(behind)).toMatchObject({ status: "pending", attempts: 0 });

    expect((await adminPost("/admin/api/dead/dismiss", { receiptIds: [dead] }, ADMIN)).status).toBe(200);
    await processBatch(env, [behind], later());
    expect(await receiptRow(behind)).toMatchObject({ status: "processed", attempts: 1 });
    expect(await deliveryRow(behind, "ledger")).toMatchObject({ status: "processed", attempts: 1 });
    expect((await arrivals("ord-crm", "crm")).filter((id) => id === dead || id === behind)).toEqual([dead, behind]);
  });

  it('with on_dead = "skip" on the second route alone, does not hold the later ones back', {
    timeout: 90_000,
  }, async () => {
    const { behind: after } = await deadThenTwoBehind("order-routes-skip", "acct_sk1", "refuse-ledger", (dead) =>
      whenEvery([dead], "ledger", "ledger delivery dead", (row) => row.status === "dead"),
    );
    await whenEvery(after, "ledger", "ledger deliveries processed", (row) => row.status === "processed");
    expect((await arrivals("ors-ledger", "ledger")).filter((id) => after.includes(id))).toEqual(after);
    for (const id of after) expect((await deliveryRow(id, "ledger"))?.attempts).toBe(1);
  });
});
