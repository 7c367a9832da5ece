import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { processDeliveries } from "../../src/consumers/deliveries/deliveries";
import {
  type CommittedDelivery,
  recoveredRoutes,
  releaseStatements,
} from "../../src/consumers/deliveries/release-waiting";
import { processReceipt } from "../../src/consumers/receipts/process";
import { database } from "../../src/db/client";
import type { DeliveryControl } from "../../src/gate/control";
import type { SourceRoute } from "../../src/sources/config";
import { receiptRow } from "../consumers/support/processing";
import { eventually } from "../support/deliveries";
import { deliveryRow, failThenComeBack, keysOf, lane, sendCredit, setLane, type WaitingDelivery } from "./gate-support";

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
      // The update finds its rows by key; the bounded choice of them seeks the partial index of waiting rows.
      const own = await plan(statements.own);
      expect(own).toMatch(/^SEARCH receipts USING PRIMARY KEY \(id=\?\)/);
      expect(own).toMatch(/SEARCH receipts USING INDEX receipts_retrying \(next_attempt_at>\?\)/);
      expect(own).not.toMatch(/receipts_source_event_key|SCAN receipts/);
      const further = await plan(statements.further);
      expect(further).toMatch(/SEARCH deliveries USING INDEX deliveries_unfinished \(next_attempt_at>\?\)/);
      expect(further).not.toMatch(/SCAN deliveries|SCAN receipts/);
    }
  });
});

/** A receipt's own route: its row in receipts, run by the receipt's consumer. */
const ownRoute: WaitingDelivery = {
  failedOnce: async (receiptId) => {
    const row = await receiptRow(receiptId);
    return row.status === "pending" && row.attempts === 1 && row.nextAttemptAt !== null ? row : undefined;
  },
  processed: async (receiptId) => (await receiptRow(receiptId)).status === "processed",
  runDue: async (receiptId, at) => {
    await env.DB.prepare("UPDATE receipts SET next_attempt_at = ? WHERE id = ?").bind(at, receiptId).run();
    return processReceipt(env, receiptId, at);
  },
};

/** Route `further` of source gate-recovering-fan: its row in deliveries, run by the deliveries' consumer. */
const furtherRoute: WaitingDelivery = {
  failedOnce: async (receiptId) => {
    const row = await deliveryRow(receiptId, "further");
    return row?.status === "pending" && row.attempts === 1 && row.nextAttemptAt !== null ? row : undefined;
  },
  processed: async (receiptId) => (await deliveryRow(receiptId, "further"))?.status === "processed",
  runDue: async (receiptId, at) => {
    await env.DB.prepare("UPDATE deliveries SET next_attempt_at = ? WHERE receipt_id = ? AND route = 'further'")
      .bind(at, receiptId)
      .run();
    return (await processDeliveries(env, "further", [receiptId], at)).get(receiptId);
  },
};

describe("a destination that comes back", () => {
  it("sends the deliveries still waiting for it at once, each spending the retry it was due", {
    timeout: 120_000,
  }, async () => {
    const { first, waiting } = await failThenComeBack("gate-recovering", "recovering", "acct_back", ownRoute);
    for (const row of await Promise.all(waiting.map(receiptRow)))
      expect(row).toMatchObject({ status: "processed", attempts: 2, nextAttemptAt: null });
    const requests = await lane("recovering");
    for (const receiptId of [first, ...waiting])
      expect(requests.filter((request) => keysOf([request])[0] === receiptId).map((request) => request.answer)).toEqual(
        [503, 204],
      );
  });
});

describe("a release after a long outage", () => {
  it("makes at most its limit due, and each released delivery's success releases the next", {
    timeout: 120_000,
  }, async () => {
    await setLane("recovering", 503);
    const waiting: string[] = [];
    for (const amount of [4, 5, 6]) {
      const receiptId = await sendCredit("gate-recovering", { account: "acct_bounded", amount });
      await eventually(() => ownRoute.failedOnce(receiptId), 30_000, "a failed first attempt");
      waiting.push(receiptId);
    }
    await setLane("recovering", 204);

    // A release bounded to 1: the longest waiting is made due now (still a delivery that waited), the others not.
    const now = Date.now();
    const recovered = { source: "gate-recovering", route: "default", oneRoute: true };
    const released = await releaseStatements(database(env), recovered, now, 1).own;
    expect(released.map((row) => row.receiptId)).toEqual([waiting[0]]);
    expect((await receiptRow(waiting[0]!)).nextAttemptAt).toBe(now);
    for (const receiptId of waiting.slice(1)) expect((await receiptRow(receiptId)).nextAttemptAt).toBeGreaterThan(now);

    // Its attempt goes through and, as one that waited, releases the rest: through the real queue, long before
    // their hour's delay.
    expect(await processReceipt(env, waiting[0]!, now)).toEqual({ kind: "done", status: "processed" });
    await eventually(
      async () =>
        (await Promise.all(waiting.map(receiptRow))).every((row) => row.status === "processed") ? true : undefined,
      60_000,
      "the rest released by the first one's success",
    );
  });
});

describe("a further route's destination that comes back", () => {
  it("sends that route's deliveries still waiting for it at once, and no other route's", {
    timeout: 120_000,
  }, async () => {
    const { first, waiting } = await failThenComeBack(
      "gate-recovering-fan",
      "recovering-further",
      "acct_fan_back",
      furtherRoute,
    );
    for (const receiptId of waiting)
      expect(await deliveryRow(receiptId, "further")).toMatchObject({ status: "processed", attempts: 2 });
    // The receipts' own route went through the first time and was not sent again.
    const steady = keysOf(await lane("recovering-steady"));
    for (const receiptId of [first, ...waiting])
      expect(steady.filter((key) => key === `${receiptId}:steady`)).toHaveLength(1);
  });
});
