import { and, eq, isNull, lt, lte, or, sql } from "drizzle-orm";
import type { Database } from "../../db/client";
import { inJsonList, inJsonPairs } from "../../db/id-list";
import { deliveries } from "../../db/schema";
import { LEASE_MS } from "./lease";

/**
 * A further delivery's lease (docs/processing.md, "Deliveries"), kept as a receipt's is (lease.ts): taking it counts
 * the attempt, and one taken but never used is given back with its count.
 */

/** Leases every delivery of `route` among `receiptIds` that is free to take, counting its attempt; returns each generation. */
export async function leaseDeliveries(
  db: Database,
  route: string,
  receiptIds: readonly string[],
  now: number,
): Promise<Map<string, number>> {
  if (receiptIds.length === 0) return new Map();
  const rows = await db
    .update(deliveries)
    .set({
      status: "processing",
      leaseUntil: now + LEASE_MS,
      leaseGeneration: sql`${deliveries.leaseGeneration} + 1`,
      attempts: sql`${deliveries.attempts} + 1`,
    })
    .where(
      and(
        inJsonList(deliveries.receiptId, receiptIds),
        eq(deliveries.route, route),
        isNull(deliveries.committedAt),
        or(
          and(
            eq(deliveries.status, "pending"),
            or(isNull(deliveries.nextAttemptAt), lte(deliveries.nextAttemptAt, now)),
          ),
          and(eq(deliveries.status, "processing"), lt(deliveries.leaseUntil, now)),
        ),
      ),
    )
    .returning({ receiptId: deliveries.receiptId, leaseGeneration: deliveries.leaseGeneration });
  return new Map(rows.map((row) => [row.receiptId, row.leaseGeneration]));
}

/**
 * Gives back leases taken for attempts that never started (out of time, `mayStartAttempt`), as `releaseLeases` does
 * for receipts: pending again, the counted attempt taken back, so an attempt that never ran is never later counted as
 * abandoned. Fenced by generation: a lease since taken over is left alone.
 */
export async function releaseDeliveryLeases(
  db: Database,
  route: string,
  held: readonly { receiptId: string; generation: number }[],
): Promise<void> {
  if (held.length === 0) return;
  await db
    .update(deliveries)
    .set({ status: "pending", leaseUntil: null, attempts: sql`${deliveries.attempts} - 1` })
    .where(
      and(
        eq(deliveries.route, route),
        isNull(deliveries.committedAt),
        eq(deliveries.status, "processing"),
        inJsonPairs(
          deliveries.receiptId,
          deliveries.leaseGeneration,
          held.map(({ receiptId, generation }) => [receiptId, generation] as const),
        ),
      ),
    );
}
