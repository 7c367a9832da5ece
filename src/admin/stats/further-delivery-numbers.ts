import { sql } from "drizzle-orm";
import type { Database } from "../../db/client";
import { deliveries, receipts } from "../../db/schema";

/**
 * The per-source numbers of further deliveries (routes 2–16 of a receipt, `deliveries`), which a receipt's own
 * status never shows: the dead ones, and the oldest still waiting. Each is read through the partial index that holds
 * only those rows (the literal conditions, as the indexes are written), then each receipt by its primary key for its
 * source and arrival: rows read are twice the dead (or waiting) further deliveries, never the traffic. CROSS JOIN
 * keeps the partial index outside: grouped by source, the planner would rather read every receipt.
 */

/** Dead further deliveries per source (deliveries_dead). */
export function deadFurtherBySource(db: Database, onlySource: string | undefined) {
  return db.all<{ source: string; total: number }>(
    sql`SELECT r.source AS source, COUNT(*) AS total FROM ${deliveries} AS d INDEXED BY deliveries_dead
      CROSS JOIN ${receipts} AS r WHERE r.id = d.receipt_id AND d.status = 'dead' ${sourceIs(onlySource)}
      GROUP BY r.source`,
  );
}

/** Per source, the arrival of the oldest receipt with a further delivery pending or processing (deliveries_unfinished). */
export function oldestWaitingFurtherBySource(db: Database, onlySource: string | undefined) {
  return db.all<{ source: string; oldest: number }>(
    sql`SELECT r.source AS source, MIN(r.received_at) AS oldest
      FROM ${deliveries} AS d INDEXED BY deliveries_unfinished CROSS JOIN ${receipts} AS r
      WHERE r.id = d.receipt_id AND d.status IN ('pending', 'processing') ${sourceIs(onlySource)} GROUP BY r.source`,
  );
}

function sourceIs(onlySource: string | undefined) {
  return onlySource === undefined ? sql`` : sql`AND r.source = ${onlySource}`;
}
