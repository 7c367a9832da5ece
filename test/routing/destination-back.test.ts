import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { processDeliveries } from "../../src/consumers/deliveries";
import { processReceipt } from "../../src/consumers/process";
import { type CommittedDelivery, recoveredRoutes, releaseStatements } from "../../src/consumers/release-waiting";
import { database } from "../../src/db/client";
import type { DeliveryControl } from "../../src/gate/control";
import type { SourceRoute } from "../../src/sources/config";
import { receiptRow } from "../consumers/support/processing";
import { eventually } from "../support/deliveries";
import { deliveryRow, keysOf, lane, sendCredit, setLane } from "./gate-support";

/**
 * When a destination comes back (docs/processing.md, "When a destination comes back"): the first delivery that had
 * waited out its retry delay and now goes through releases every other delivery still waiting for that route, so
 * they go at once instead of each sitting out the rest of its delay. Source gate-recovering
 * (test/fixtures/sources/gates.json) retries after an hour, without jitter, so nothing here comes due by itself.
 */

function routeWith(control: DeliveryControl | null, ordering = false): SourceRoute {
  return { rules: { name: "main", control, ordering: ordering ? {} : null } } as unknown as SourceRoute;
}

function delivery(overrides: Partial<CommittedDelivery> = {}): CommittedDelivery {
  return { source: "s", route: routeWith(null), oneRoute: true, waited: true, processed: true, ...overrides };
}

describe("which routes a finished attempt releases", () => {
  it("only a delivery that had waited and was processed, once per route", () => {
    expect(recoveredRoutes([delivery(), delivery()])).toEqual([{ source: "s", route: "main", oneRoute: true }]);
    // A first attempt (no due time), a failure, a route whose gate paces it or that keeps an order: nothing.
    expect(recoveredRoutes([delivery({ waited: false })])).toEqual([]);
    expect(recoveredRoutes([delivery({ processed: false })])).toEqual([]);
    const paced: DeliveryControl = { rateLimit: null, maxInFlight: 2, breaker: null, paused: false };
    expect(recoveredRoutes([delivery({ route: routeWith(paced) })])).toEqual([]);
    expect(recoveredRoutes([delivery({ route: routeWith(null, true) })])).toEqual([]);
    // A breaker alone: its probe's success is exactly when the held deliveries should go.
    const breaker: DeliveryControl = {
      rateLimit: null,
      maxInFlight: null,
      breaker: { failures: 2, probeIntervalMs: 30_000 },
      paused: false,
    };
    expect(recoveredRoutes([delivery({ route: routeWith(breaker) })])).toEqual([
      { source: "s", route: "main", oneRoute: true },
    ]);
  });
});

describe("what a release reads", () => {
  it("seeks the partial indexes of waiting rows, never a source's every receipt or every delivery", async () => {
    const plan = async (statement: { toSQL: () => { sql: string; params: unknown[] } }) => {
      const { sql, params } = statement.toSQL();
      const { results } = await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`)
        .bind(...params)
        .all<{ detail: string }>();
      return results.map((row) => row.detail).join(" | ");
    };
    for (const oneRoute of [true, false]) {
      const statements = releaseStatements(database(env), { source: "s", route: "crm", oneRoute }, Date.now());
      expect(await plan(statements.own)).toMatch(
        /^SEARCH receipts USING INDEX receipts_retrying \(next_attempt_at>\?\)$/,
      );
      expect(await plan(statements.further)).toMatch(
        /^SEARCH deliveries USING INDEX deliveries_unfinished \(next_attempt_at>\?\).*SEARCH receipts USING PRIMARY KEY/,
      );
    }
  });
});

describe("a destination that comes back", () => {
  it("sends the deliveries still waiting for it at once, each spending the retry it was due", {
    timeout: 120_000,
  }, async () => {
    await setLane("recovering", 503);
    const failedOnce = async (receiptId: string) =>
      eventually(
        async () => {
          const row = await receiptRow(receiptId);
          return row.status === "pending" && row.attempts === 1 && row.nextAttemptAt !== null ? row : undefined;
        },
        30_000,
        "a failed first attempt",
      );
    // The first fails before the others are sent, so it is due first.
    const first = await sendCredit("gate-recovering", { account: "acct_back", amount: 1 });
    const firstDue = (await failedOnce(first)).nextAttemptAt!;
    const waiting = [
      await sendCredit("gate-recovering", { account: "acct_back", amount: 2 }),
      await sendCredit("gate-recovering", { account: "acct_back", amount: 3 }),
    ];
    for (const receiptId of waiting) expect((await failedOnce(receiptId)).nextAttemptAt).toBeGreaterThan(firstDue);

    // The destination is back; the first delivery's retry comes due and goes through.
    await setLane("recovering", 204);
    expect(await processReceipt(env, first, firstDue)).toEqual({ kind: "done", status: "processed" });

    // The others were due an hour later: released, they go now, through the real queue.
    await eventually(
      async () =>
        (await Promise.all(waiting.map(receiptRow))).every((row) => row.status === "processed") ? true : undefined,
      60_000,
      "the waiting deliveries processed",
    );
    for (const row of await Promise.all(waiting.map(receiptRow)))
      expect(row).toMatchObject({ status: "processed", attempts: 2, nextAttemptAt: null });
    const requests = await lane("recovering");
    for (const receiptId of [first, ...waiting])
      expect(requests.filter((request) => keysOf([request])[0] === receiptId).map((request) => request.answer)).toEqual(
        [503, 204],
      );
  });
});

describe("a further route's destination that comes back", () => {
  it("sends that route's deliveries still waiting for it at once, and no other route's", {
    timeout: 120_000,
  }, async () => {
    await setLane("recovering-further", 503);
    const failedOnce = async (receiptId: string) =>
      eventually(
        async () => {
          const row = await deliveryRow(receiptId, "further");
          return row?.status === "pending" && row.attempts === 1 && row.nextAttemptAt !== null ? row : undefined;
        },
        30_000,
        "a failed first attempt of the further route",
      );
    const first = await sendCredit("gate-recovering-fan", { account: "acct_fan_back", amount: 1 });
    const firstDue = (await failedOnce(first)).nextAttemptAt!;
    const waiting = [
      await sendCredit("gate-recovering-fan", { account: "acct_fan_back", amount: 2 }),
      await sendCredit("gate-recovering-fan", { account: "acct_fan_back", amount: 3 }),
    ];
    for (const receiptId of waiting) expect((await failedOnce(receiptId)).nextAttemptAt).toBeGreaterThan(firstDue);

    await setLane("recovering-further", 204);
    expect(await processDeliveries(env, "further", [first], firstDue)).toEqual(
      new Map([[first, { kind: "done", status: "processed" }]]),
    );
    await eventually(
      async () =>
        (await Promise.all(waiting.map((receiptId) => deliveryRow(receiptId, "further")))).every(
          (row) => row?.status === "processed",
        )
          ? true
          : undefined,
      60_000,
      "the waiting further deliveries processed",
    );
    for (const receiptId of waiting)
      expect(await deliveryRow(receiptId, "further")).toMatchObject({ status: "processed", attempts: 2 });
    // The receipts' own route went through the first time and was not sent again.
    const steady = keysOf(await lane("recovering-steady"));
    for (const receiptId of [first, ...waiting])
      expect(steady.filter((key) => key === `${receiptId}:steady`)).toHaveLength(1);
  });
});
