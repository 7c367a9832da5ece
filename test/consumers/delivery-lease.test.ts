import { env } from "cloudflare:workers";
import { and, eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { leaseDeliveries, releaseDeliveryLeases } from "../../src/consumers/lease/delivery-lease";
import { LEASE_MS } from "../../src/consumers/lease/lease";
import { database } from "../../src/db/client";
import { deliveries } from "../../src/db/schema";
import { ulid } from "../../src/lib/ulid";

/**
 * A further delivery's lease (src/consumers/lease/delivery-lease.ts) at its edges, against the real D1 table: due at
 * exactly now, a lease expiring exactly now, and a lease given back (its counted attempt with it) only while it
 * is still the one taken and the delivery is not committed.
 */

const ROUTE = "lease-edges";
const now = Date.parse("2026-12-01T10:00:00Z");
type DeliveryRow = typeof deliveries.$inferInsert;

async function seed(row: Partial<DeliveryRow>): Promise<string> {
  const receiptId = ulid(now);
  await database(env)
    .insert(deliveries)
    .values({ receiptId, route: ROUTE, status: "pending", attempts: 1, ...row });
  return receiptId;
}

async function rowOf(receiptId: string) {
  const [row] = await database(env)
    .select()
    .from(deliveries)
    .where(and(eq(deliveries.receiptId, receiptId), eq(deliveries.route, ROUTE)));
  return row!;
}

describe("taking a further delivery's lease", () => {
  it("takes a delivery due exactly now, and not one due a millisecond later", async () => {
    const dueNow = await seed({ nextAttemptAt: now });
    const dueLater = await seed({ nextAttemptAt: now + 1 });
    const leased = await leaseDeliveries(database(env), ROUTE, [dueNow, dueLater], now);
    expect([...leased.keys()]).toEqual([dueNow]);
    expect(await rowOf(dueNow)).toMatchObject({ status: "processing", attempts: 2, leaseUntil: now + LEASE_MS });
    expect(await rowOf(dueLater)).toMatchObject({ status: "pending", attempts: 1 });
  });

  it("takes over a lease that expired before now, and never one that expires at now or later", async () => {
    const expired = await seed({ status: "processing", leaseUntil: now - 1, leaseGeneration: 3 });
    const expiringNow = await seed({ status: "processing", leaseUntil: now, leaseGeneration: 3 });
    const leased = await leaseDeliveries(database(env), ROUTE, [expired, expiringNow], now);
    expect(Object.fromEntries(leased)).toEqual({ [expired]: 4 });
    expect(await rowOf(expiringNow)).toMatchObject({ status: "processing", leaseGeneration: 3, attempts: 1 });
  });
});

describe("giving a lease back", () => {
  it("makes the delivery pending again and takes back the attempt its lease counted", async () => {
    const receiptId = await seed({ nextAttemptAt: now });
    const generation = (await leaseDeliveries(database(env), ROUTE, [receiptId], now)).get(receiptId)!;
    await releaseDeliveryLeases(database(env), ROUTE, [{ receiptId, generation }]);
    expect(await rowOf(receiptId)).toMatchObject({ status: "pending", attempts: 1, leaseUntil: null });
  });

  it("leaves a committed delivery, and a lease since taken over, as they are", async () => {
    const committed = await seed({ status: "processing", leaseGeneration: 2, attempts: 2, committedAt: now });
    const takenOver = await seed({ status: "processing", leaseGeneration: 5, attempts: 3 });
    await releaseDeliveryLeases(database(env), ROUTE, [
      { receiptId: committed, generation: 2 },
      { receiptId: takenOver, generation: 4 },
    ]);
    expect(await rowOf(committed)).toMatchObject({ status: "processing", attempts: 2 });
    expect(await rowOf(takenOver)).toMatchObject({ status: "processing", attempts: 3 });
  });
});
