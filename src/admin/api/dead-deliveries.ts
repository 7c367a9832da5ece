import { sql } from "drizzle-orm";
import { database } from "../../db/client";
import { deliveries, receipts } from "../../db/schema";

/** A further route's dead delivery, as the dead-letter list shows it: enough to replay or dismiss it by route. */
export interface DeadFurtherDelivery {
  receiptId: string;
  source: string;
  eventKey: string;
  eventType: string | null;
  receivedAt: number;
  route: string;
  attempts: number;
  lastError: string | null;
}

/** Listed at most, newest first: the dead list's page of receipts has its own cursor; this list is a window. */
const DEAD_DELIVERIES_SHOWN = 100;

/**
 * Dead further deliveries (routes 2–16 of a receipt, `deliveries`), which a receipt's own status never shows: a
 * route dead-lettering every event would otherwise be missing from the dead list. Read through the partial index
 * deliveries_dead (CROSS JOIN keeps it outside), each receipt by its primary key: rows read are the dead ones.
 */
export async function deadFurtherDeliveries(env: Env, source: string | undefined): Promise<DeadFurtherDelivery[]> {
  const db = database(env);
  return db.all<DeadFurtherDelivery>(
    sql`SELECT d.receipt_id AS receiptId, r.source AS source, r.event_key AS eventKey, r.event_type AS eventType,
        r.received_at AS receivedAt, d.route AS route, d.attempts AS attempts, d.last_error AS lastError
      FROM ${deliveries} AS d INDEXED BY deliveries_dead CROSS JOIN ${receipts} AS r
      WHERE r.id = d.receipt_id AND d.status = 'dead' ${source === undefined ? sql`` : sql`AND r.source = ${source}`}
      ORDER BY d.receipt_id DESC LIMIT ${DEAD_DELIVERIES_SHOWN}`,
  );
}
