import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { hadWaited, releaseStatements } from "../../src/consumers/deliveries/release-waiting";
import { database } from "../../src/db/client";
import { deliveries } from "../../src/db/schema";
import { seedReceipt, uniqueSource } from "../admin/support";

/**
 * What a destination coming back releases (src/consumers/deliveries/release-waiting.ts), at its edges: a first attempt never
 * counts as one that had waited, and only pending receipts waiting for the route are made due, never a dead one.
 * The whole release through the consumers is test/routing/destination-back.test.ts.
 */

const now = Date.parse("2026-12-01T10:00:00Z");

describe("a delivery that had waited", () => {
  it("is one with a counted attempt; a first attempt (none counted yet) never is", () => {
    expect(hadWaited({ attempts: 0 })).toBe(false);
    expect(hadWaited({ attempts: 1 })).toBe(true);
  });
});

describe("the receipts a release makes due", () => {
  it("are the pending ones waiting for the route, never a dead one nor one already due", async () => {
    const source = uniqueSource("release-edges");
    const waiting = await seedReceipt({ source, receivedAt: now - 5000, attempts: 1, nextAttemptAt: now + 3_600_000 });
    const dead = await seedReceipt({
      source,
      receivedAt: now - 4000,
      status: "dead",
      attempts: 13,
      nextAttemptAt: now + 3_600_000,
    });
    const due = await seedReceipt({ source, receivedAt: now - 3000, attempts: 1, nextAttemptAt: now });
    const released = await releaseStatements(database(env), { source, route: "main", oneRoute: true }, now).own;
    expect(released.map((row) => row.receiptId)).toEqual([waiting]);
    const rows = await env.DB.prepare("SELECT id, status, next_attempt_at FROM receipts WHERE source = ? ORDER BY id")
      .bind(source)
      .all<{ id: string; status: string; next_attempt_at: number }>();
    expect(rows.results).toEqual([
      { id: waiting, status: "pending", next_attempt_at: now },
      { id: dead, status: "dead", next_attempt_at: now + 3_600_000 },
      { id: due, status: "pending", next_attempt_at: now },
    ]);
  });
});

describe("the further deliveries a release makes due", () => {
  it("are chosen among the route's own waiting deliveries, so another route's never use up its limit", async () => {
    const source = uniqueSource("release-edges-fan");
    const otherRouteFirst = await seedReceipt({ source, receivedAt: now - 5000 });
    const ours = await seedReceipt({ source, receivedAt: now - 4000 });
    await database(env)
      .insert(deliveries)
      .values([
        { receiptId: otherRouteFirst, route: "other", status: "pending", attempts: 1, nextAttemptAt: now + 1000 },
        { receiptId: ours, route: "crm", status: "pending", attempts: 1, nextAttemptAt: now + 3_600_000 },
      ]);
    // A limit of one: the soonest waiting delivery is the other route's, and must not be the one chosen.
    const statements = releaseStatements(database(env), { source, route: "crm", oneRoute: false }, now, 1);
    expect((await statements.further).map((row) => row.receiptId)).toEqual([ours]);
  });
});
