import { type SQL, sql } from "drizzle-orm";
import { type Database, database } from "../../db/client";
import { deliveries, receipts } from "../../db/schema";
import { apiError } from "../../lib/errors";
import { receiptDatabaseEnvs } from "../../sources/databases";
import type { ReceiptFilter } from "./filters";
import { receiptsMatching } from "./receipt-slice";

/**
 * Further routes' dead deliveries (routes 2–16 of a receipt, `deliveries`), which a receipt's own status never
 * shows: a route dead-lettering every event would otherwise be missing from the dead list. GET /admin/api/dead lists
 * them beside the dead receipts (`deadDeliveries`), and the dashboard's dead letters page under them.
 *
 * Paged by their place in the partial index deliveries_dead, (route, receipt id), read backwards: by route, each
 * route's newest first. A page reads its rows straight off that index (a range from the cursor, no sort), each
 * receipt by its primary key for the filter: rows read are the page's, plus the dead further deliveries the filter
 * passes over (another source's, with `source=`). The cursor is the last row's place, `<route>.<receipt id>`, one
 * boundary shared by every receipt database, each of which reads its own first `limit + 1` past it (so none is
 * skipped in the merge, as receipt-pages.ts argues). Without a stamp for entering `dead` (the deliveries table keeps
 * none), a pass lists each delivery that is dead when its place is read; one that dies behind the reader is listed
 * by the next pass, and the watch's dead-letters alert counts it at once.
 */

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

export interface DeadDeliveriesPage {
  deadDeliveries: DeadFurtherDelivery[];
  /** Pass as `deliveriesBefore` for the next page; null when this page is the last. */
  deadDeliveriesCursor: string | null;
}

/** The query parameter that carries a page's cursor (beside the receipts' own `before` / `after`). */
export const DEAD_DELIVERIES_CURSOR = "deliveriesBefore";

interface Place {
  route: string;
  receiptId: string;
}

// Route names are [a-z0-9_-] (src/sources/routes.ts), so a dot cannot be part of one.
const CURSOR = /^([a-z0-9][a-z0-9_-]{0,63})\.([0-9A-HJKMNP-TV-Z]{26})$/;

/** The cursor's place, or a 400 naming the parameter. */
export function parseDeadDeliveriesCursor(text: string | undefined): Place | null {
  if (text === undefined || text === "") return null;
  const match = CURSOR.exec(text);
  if (!match)
    throw apiError(
      400,
      "invalid_query",
      `Query parameter "${DEAD_DELIVERIES_CURSOR}" must be a previous answer's deadDeliveriesCursor.`,
    );
  return { route: match[1]!, receiptId: match[2]! };
}

/** The filter's dead further deliveries past `cursor`, every receipt database's merged (see above). */
export async function deadDeliveriesPage(
  env: Env,
  filter: ReceiptFilter,
  cursor: Place | null,
): Promise<DeadDeliveriesPage> {
  // The receipts' status is not the deliveries': every other condition is the receipt's event's.
  const matching = receiptsMatching({ ...filter, statuses: undefined });
  const read = await Promise.all(
    receiptDatabaseEnvs(env).map(({ env: databaseEnv }) =>
      readDeadDeliveries(database(databaseEnv), matching, cursor, filter.limit + 1),
    ),
  );
  const rows = read.flat().sort(byPlaceBackwards);
  const page = rows.slice(0, filter.limit);
  const last = page.at(-1);
  return {
    deadDeliveries: page,
    deadDeliveriesCursor: rows.length > filter.limit && last ? `${last.route}.${last.receiptId}` : null,
  };
}

/** The index's order read backwards: route, then receipt id, each descending. */
function byPlaceBackwards(a: Place, b: Place): number {
  if (a.route !== b.route) return a.route < b.route ? 1 : -1;
  return a.receiptId < b.receiptId ? 1 : a.receiptId > b.receiptId ? -1 : 0;
}

function readDeadDeliveries(db: Database, matching: SQL | undefined, cursor: Place | null, rows: number) {
  // CROSS JOIN keeps the partial index outside; the literal status condition is the index's own, as SQLite needs it.
  return db.all<DeadFurtherDelivery>(
    sql`SELECT d.receipt_id AS receiptId, ${receipts.source} AS source, ${receipts.eventKey} AS eventKey,
        ${receipts.eventType} AS eventType, ${receipts.receivedAt} AS receivedAt, d.route AS route,
        d.attempts AS attempts, d.last_error AS lastError
      FROM ${deliveries} AS d INDEXED BY deliveries_dead CROSS JOIN ${receipts}
      WHERE ${receipts.receiptId} = d.receipt_id AND d.status = 'dead'
        ${cursor === null ? sql`` : sql`AND (d.route, d.receipt_id) < (${cursor.route}, ${cursor.receiptId})`}
        ${matching === undefined ? sql`` : sql`AND ${matching}`}
      ORDER BY d.route DESC, d.receipt_id DESC LIMIT ${rows}`,
  );
}
