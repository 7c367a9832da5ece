import { sql } from "drizzle-orm";
import type { Database } from "../db/client";
import { type EarlierDelivery, orderingWait, type RouteOrdering } from "../routing/ordering";

/**
 * The ordering check of an ordered route (docs/routing.md "Ordering"): before an attempt, is an earlier-received
 * delivery of the same ordering value still outstanding? One D1 read for a slice's ordered deliveries; a route
 * without `ordered_by` never gets here.
 */

export interface OrderedDelivery {
  receiptId: string;
  ordering: RouteOrdering;
}

interface EarlierRow {
  receiptId: string;
  status: string | null;
  nextAttemptAt: number | null;
  leaseUntil: number | null;
}

/**
 * The deliveries that must wait, each with how long and why. For each delivery D1 is asked for the nearest earlier
 * receipt (by id, which is received order) of the same source and ordering value that is still pending, processing
 * or dead — one seek backwards in the partial index `receipts_ordered_outstanding`, whose condition the subquery
 * repeats word for word (SQLite uses a partial index only then). With `on_dead = "skip"` a dead one is passed over.
 */
export async function orderingHolds(
  db: Database,
  deliveries: readonly OrderedDelivery[],
  now: number,
): Promise<Map<string, { waitMs: number; reason: string }>> {
  const holds = new Map<string, { waitMs: number; reason: string }>();
  for (const onDead of ["block", "skip"] as const) {
    const group = deliveries.filter(({ ordering }) => ordering.onDead === onDead);
    if (group.length === 0) continue;
    const rows = await db.all<EarlierRow>(sql`
      SELECT later.id AS receiptId, earlier.status AS status, earlier.next_attempt_at AS nextAttemptAt,
             earlier.lease_until AS leaseUntil
      FROM receipts AS later
      JOIN receipts AS earlier ON earlier.id = (
        SELECT candidate.id FROM receipts AS candidate
        WHERE candidate.source = later.source AND candidate.ordering_key = later.ordering_key
          AND candidate.id < later.id
          AND candidate.ordering_key IS NOT NULL AND candidate.status IN ('pending', 'processing', 'dead')
          ${onDead === "skip" ? sql`AND candidate.status <> 'dead'` : sql``}
        ORDER BY candidate.id DESC LIMIT 1
      )
      WHERE later.id IN (SELECT value FROM json_each(${JSON.stringify(group.map(({ receiptId }) => receiptId))}))
        AND later.ordering_key IS NOT NULL`);
    for (const row of rows) {
      const delivery = group.find(({ receiptId }) => receiptId === row.receiptId);
      if (!delivery || row.status === null) continue;
      const earlier: EarlierDelivery = {
        status: row.status,
        nextAttemptAt: row.nextAttemptAt,
        leaseUntil: row.leaseUntil,
      };
      const wait = orderingWait(delivery.ordering, [earlier], now);
      if (wait) holds.set(row.receiptId, wait);
    }
  }
  return holds;
}
