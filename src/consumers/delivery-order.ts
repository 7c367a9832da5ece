import { type SQL, sql } from "drizzle-orm";
import type { Database } from "../db/client";
import { type EarlierDelivery, orderingWait, type RouteOrdering } from "../routing/ordering";

/**
 * The ordering check of an ordered route (docs/routing.md "Ordering"): before an attempt, is an earlier-received
 * delivery to the same route, of the same ordering value, still outstanding? One D1 read of `receipts` for a slice's
 * ordered deliveries, and one of `deliveries` when any of them belongs to a source with several routes; a route
 * without `ordered_by` never gets here.
 */

export interface OrderedDelivery {
  receiptId: string;
  route: string;
  ordering: RouteOrdering;
  /**
   * The source has several routes: an earlier delivery to this route may be a further one, in `deliveries`. A
   * one-route source's deliveries are all receipt rows, so it never reads that table.
   */
  fannedOut: boolean;
}

interface EarlierRow {
  receiptId: string;
  route: string;
  status: string | null;
  nextAttemptAt: number | null;
  leaseUntil: number | null;
}

/** The key `orderingHolds` answers under: one delivery is one receipt's to one route. */
export function orderedDeliveryKey(receiptId: string, route: string): string {
  return `${receiptId}\u0000${route}`;
}

/**
 * The deliveries that must wait, each with how long and why, keyed by `orderedDeliveryKey`. The later delivery's value
 * is its receipt's `ordering_key` (written by the relay: one value per event). For each delivery D1 is asked for the
 * nearest earlier delivery (by receipt id, which is received order) to the same route with that value that is still
 * pending, processing or dead (with `on_dead = "skip"`, a dead one is passed over; a dismissed one, receipt or further
 * delivery, is finished and holds nothing):
 *
 * - in `receipts`, one seek backwards in the partial index `receipts_ordered_outstanding`: an earlier receipt of the
 *   same source whose own delivery is to this route (`route`), or that has not been fanned out yet (no `route`, no
 *   `filtered_routes`: a one-route source's every receipt, or an event whose routes are not chosen yet, which may
 *   still be this route's, so it holds the later one until its first attempt chooses);
 * - in `deliveries`, one seek backwards in `deliveries_ordered_outstanding`, for an earlier event that came to this
 *   route as a further delivery (its receipt checked to be of the same source: route names are per source).
 *
 * Each subquery repeats its partial index's condition word for word (SQLite uses a partial index only then).
 */
export async function orderingHolds(
  db: Database,
  ordered: readonly OrderedDelivery[],
  now: number,
): Promise<Map<string, { waitMs: number; reason: string }>> {
  const holds = new Map<string, { waitMs: number; reason: string }>();
  if (ordered.length === 0) return holds;
  const asked = (deliveries: readonly OrderedDelivery[]) =>
    JSON.stringify(deliveries.map(({ receiptId, route, ordering }) => [receiptId, route, ordering.onDead === "skip"]));
  const fannedOut = ordered.filter((delivery) => delivery.fannedOut);
  const reads = await Promise.all([
    db.all<EarlierRow>(earlierReceipts(asked(ordered))),
    fannedOut.length > 0 ? db.all<EarlierRow>(earlierDeliveries(asked(fannedOut))) : Promise.resolve([]),
  ]);
  const byKey = new Map(ordered.map((delivery) => [orderedDeliveryKey(delivery.receiptId, delivery.route), delivery]));
  const earlier = new Map<string, EarlierDelivery[]>();
  for (const row of reads.flat()) {
    const key = orderedDeliveryKey(row.receiptId, row.route);
    if (row.status === null || !byKey.has(key)) continue;
    const found = { status: row.status, nextAttemptAt: row.nextAttemptAt, leaseUntil: row.leaseUntil };
    earlier.set(key, [...(earlier.get(key) ?? []), found]);
  }
  for (const [key, rows] of earlier) {
    const wait = orderingWait(byKey.get(key)!.ordering, rows, now);
    if (wait) holds.set(key, wait);
  }
  return holds;
}

/** Each asked `[receiptId, route, skipDead]` with its later receipt, as the two reads below start. */
const ASKED = (askedJson: string) => sql`
  FROM json_each(${askedJson}) AS asked
  JOIN receipts AS later ON later.id = json_extract(asked.value, '$[0]')`;

function earlierReceipts(askedJson: string): SQL {
  return sql`
    SELECT later.id AS receiptId, json_extract(asked.value, '$[1]') AS route, earlier.status AS status,
           earlier.next_attempt_at AS nextAttemptAt, earlier.lease_until AS leaseUntil
    ${ASKED(askedJson)}
    JOIN receipts AS earlier ON earlier.id = (
      SELECT candidate.id FROM receipts AS candidate
      WHERE candidate.source = later.source AND candidate.ordering_key = later.ordering_key
        AND candidate.id < later.id
        AND candidate.ordering_key IS NOT NULL AND candidate.status IN ('pending', 'processing', 'dead')
        AND (candidate.route = json_extract(asked.value, '$[1]')
             OR (candidate.route IS NULL AND candidate.filtered_routes IS NULL))
        AND (candidate.status <> 'dead' OR NOT json_extract(asked.value, '$[2]'))
      ORDER BY candidate.id DESC LIMIT 1
    )
    WHERE later.ordering_key IS NOT NULL`;
}

function earlierDeliveries(askedJson: string): SQL {
  return sql`
    SELECT later.id AS receiptId, json_extract(asked.value, '$[1]') AS route, earlier.status AS status,
           earlier.next_attempt_at AS nextAttemptAt, earlier.lease_until AS leaseUntil
    ${ASKED(askedJson)}
    JOIN deliveries AS earlier ON earlier.route = json_extract(asked.value, '$[1]') AND earlier.receipt_id = (
      SELECT candidate.receipt_id FROM deliveries AS candidate
      WHERE candidate.route = json_extract(asked.value, '$[1]') AND candidate.ordering_key = later.ordering_key
        AND candidate.receipt_id < later.id
        AND candidate.ordering_key IS NOT NULL AND candidate.status IN ('pending', 'processing', 'dead')
        AND (candidate.status <> 'dead' OR NOT json_extract(asked.value, '$[2]'))
        AND EXISTS (SELECT 1 FROM receipts AS owner WHERE owner.id = candidate.receipt_id AND owner.source = later.source)
      ORDER BY candidate.receipt_id DESC LIMIT 1
    )
    WHERE later.ordering_key IS NOT NULL`;
}
