import { and, asc, eq, gt, gte, inArray, or, type SQL, sql } from "drizzle-orm";
import type { Database } from "../../db/client";
import { deliveries, receipts } from "../../db/schema";
import { apiError } from "../../lib/errors";
import { ulidFloor } from "../../lib/ulid";
import { parseDuration } from "../../sources/config";
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE, type Query, RECEIPT_STATUSES, type ReceiptStatus } from "./filters";
import { type ReceiptSummary, receiptSummaryColumns } from "./receipt-slice";

/**
 * "What changed since I last looked?" for a live tail: GET /admin/api/receipts?changedSince=…, which finds
 * receipts of any age in the window that were relayed, finished an attempt, were replayed or dismissed since a
 * cursor — not only new ones, which paging by id finds.
 *
 * Receipts have no time index besides the ULID id, and a change index would be a billed row on every write of the
 * happy path. So this reads the id range of the window (`id >= ulidFloor(now - window)`, the primary key) and
 * filters on the change times the writes already keep: relayed_at, the latest attempt's end (attempt_started_at
 * + attempt_duration_ms, written when an attempt commits), processed_at, replayed_at, dismissed_at, and
 * status_entered_at (D1's stamp on entering dead, dismissed, stale or skipped, migrations/0013). The cost is
 * the trade-off: every call reads every receipt received in the window (1 hour by default, at most 7 days), so a
 * tail polls it less often than it polls new receipts, and a wider window is for looking back, not for polling.
 *
 * Changes outside those columns are not seen: a lease taken (status processing) and a return to pending or
 * processed that writes no time. A dead verdict that keeps no time of its own (the work queue's dead-letter
 * consumer) and a dismissal undone (a restore, back to dead) are seen through status_entered_at.
 *
 * A receipt's further deliveries (routes 2–16, `deliveries`) change on their own, and their changes are the
 * receipt's: a receipt is listed at the latest change of its own delivery or any further one. A further delivery's
 * change times are its attempt's end (the attempt that retried it, or found it dead), processed_at, replayed_at and
 * its own status_entered_at (D1's stamp on entering a resting status, migrations/0022): so one set dead by the work
 * queue's dead-letter consumer, and a dismissal or restore of one, are seen though they keep no time of their own.
 * They are read by the primary key of `deliveries`, (receipt id, route), over the same id range as the receipts,
 * once, grouped by receipt (`furtherChanges`): the window's further delivery rows, beside its receipts. A further
 * delivery's lease taken, or a return to pending that writes no time, is not seen, as a receipt's. A status filter
 * is on the receipt's own status.
 *
 * Exact paging. A change time is the clock of whoever decided the change (a consumer's, the relay's D1), and the
 * change commits a moment later: a read at `now` may not yet see a change stamped just before it, but sees every
 * one stamped before `now - SETTLE_MS` ("settled"). So an answer lists changes oldest first in two parts:
 * - settled ones, paged exactly: a full page of them (`more`) hands back the last one's (changedAt, id), and
 *   nothing can later appear before it;
 * - once the settled ones past the cursor all fit, the page is filled with an early look at newer ones (at or
 *   after `settledBefore`), and the cursor stops at the settle line (`more` false), never before where the call
 *   started.
 * A pass (calls following the cursor until `more` is false) thus lists every change settled by its last read once,
 * in order, and no change stamped before a cursor it hands out can come later; the next pass lists again the early
 * look, with whatever committed late among it. A receipt is listed at its latest change: one that changes again
 * is listed again, later.
 */

export const CHANGE_PARAMETERS = ["changedSince", "window", "source", "status", "limit"] as const;

const DEFAULT_WINDOW_MS = 3_600_000;
const MAX_WINDOW_MS = 7 * 86_400_000;
/** How long a change may take to commit after the time it is stamped with, clocks' skew included. */
export const SETTLE_MS = 30_000;

export interface ChangesQuery {
  /** Changes at or after this time (epoch ms); with `afterId`, strictly after (since, afterId). */
  since: number;
  afterId: string | null;
  windowMs: number;
  source?: string;
  statuses?: ReceiptStatus[];
  limit: number;
}

export interface ChangesPage {
  /** Oldest change first; each with `changedAt`, its latest change time. */
  receipts: ChangedReceipt[];
  /** Pass as `changedSince` next time. */
  changesCursor: string;
  /** More settled changes matched than `limit`: call again at once with the cursor. */
  more: boolean;
  /** Changes at or after this time are an early look: the next pass lists them again (see above). */
  settledBefore: number;
}

/**
 * Per receipt with further deliveries, the latest time any of them changed, over the window's id range of the
 * primary key of `deliveries` (read once, then looked up per receipt). SQLite's max() is NULL if any argument is,
 * hence the COALESCEs; the outer max() is the aggregate over the receipt's routes.
 */
function furtherChanges(db: Database, fromId: string) {
  return db
    .select({
      receiptId: deliveries.receiptId,
      changedAt: sql<number>`max(max(
        coalesce(${deliveries.attemptStartedAt} + coalesce(${deliveries.attemptDurationMs}, 0), 0),
        coalesce(${deliveries.processedAt}, 0),
        coalesce(${deliveries.replayedAt}, 0),
        coalesce(${deliveries.statusEnteredAt}, 0)))`.as("further_changed_at"),
    })
    .from(deliveries)
    .where(gte(deliveries.receiptId, fromId))
    .groupBy(deliveries.receiptId)
    .as("further_changes");
}

/** The latest of the times a change writes, the receipt's own and its further deliveries' (`furtherAt`). */
function latestChange(furtherAt: SQL.Aliased<number>) {
  return sql<number>`max(
    coalesce(${receipts.relayedAt}, 0),
    coalesce(${receipts.attemptStartedAt} + coalesce(${receipts.attemptDurationMs}, 0), 0),
    coalesce(${receipts.processedAt}, 0),
    coalesce(${receipts.replayedAt}, 0),
    coalesce(${receipts.dismissedAt}, 0),
    coalesce(${receipts.statusEnteredAt}, 0),
    coalesce(${furtherAt}, 0))`;
}

function invalid(parameter: string, expectation: string): never {
  throw apiError(400, "invalid_query", `Query parameter "${parameter}" ${expectation}.`);
}

const CURSOR = /^(\d{1,15})(?:\.([0-9A-HJKMNP-TV-Z]{26}))?$/;

/** The query, read strictly: only the parameters that make sense for changes (CHANGE_PARAMETERS). */
export function parseChangesQuery(query: Query): ChangesQuery {
  const unsupported = Object.keys(query).filter((name) => !(CHANGE_PARAMETERS as readonly string[]).includes(name));
  if (unsupported.length > 0)
    invalid(unsupported[0]!, `cannot be combined with changedSince (it takes ${CHANGE_PARAMETERS.join(", ")})`);
  const cursor = query.changedSince?.trim() ?? "";
  const iso = Date.parse(cursor);
  const match = CURSOR.exec(cursor);
  if (!match && !Number.isFinite(iso))
    invalid("changedSince", "must be epoch milliseconds, an ISO 8601 date or a previous answer's changesCursor");
  const windowText = query.window?.trim();
  const windowMs = windowText ? parseDuration(windowText) : DEFAULT_WINDOW_MS;
  if (windowMs === null || windowMs <= 0 || windowMs > MAX_WINDOW_MS)
    invalid("window", 'must be a duration like "15m" or "24h", at most 7d');
  const statuses = query.status
    ?.split(",")
    .map((status) => status.trim())
    .filter(Boolean);
  for (const status of statuses ?? []) {
    if (!(RECEIPT_STATUSES as readonly string[]).includes(status))
      invalid("status", `must be a comma-separated list of ${RECEIPT_STATUSES.join(", ")}`);
  }
  const limit = query.limit === undefined ? DEFAULT_PAGE_SIZE : Number(query.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE_SIZE)
    invalid("limit", `must be an integer from 1 to ${MAX_PAGE_SIZE}`);
  return {
    since: match ? Number(match[1]) : iso,
    afterId: match?.[2] ?? null,
    windowMs,
    source: query.source?.trim() || undefined,
    statuses: statuses?.length ? (statuses as ReceiptStatus[]) : undefined,
    limit,
  };
}

export type ChangedReceipt = ReceiptSummary & { changedAt: number };

/** Oldest change first, by (changedAt, id): the order of a changes answer and of its cursor. */
export function byChange(a: ChangedReceipt, b: ChangedReceipt): number {
  return a.changedAt - b.changedAt || (a.receiptId < b.receiptId ? -1 : a.receiptId > b.receiptId ? 1 : 0);
}

/**
 * One database's receipts received in the window that changed at or after the cursor: the first `limit + 1` by
 * (changedAt, id), the one more telling whether another answer follows.
 */
export async function readChanges(db: Database, query: ChangesQuery, now: number): Promise<ChangedReceipt[]> {
  const fromId = ulidFloor(now - query.windowMs);
  const further = furtherChanges(db, fromId);
  const changedAt = latestChange(further.changedAt);
  const sinceCursor: SQL =
    query.afterId === null
      ? gte(changedAt, query.since)
      : or(gt(changedAt, query.since), and(eq(changedAt, query.since), gt(receipts.receiptId, query.afterId)))!;
  return db
    .select({ ...receiptSummaryColumns, changedAt })
    .from(receipts)
    .leftJoin(further, eq(further.receiptId, receipts.receiptId))
    .where(
      and(
        gte(receipts.receiptId, fromId),
        // `+source` keeps the planner on the id range rather than the (source, event_key) index.
        query.source === undefined ? undefined : sql`+${receipts.source} = ${query.source}`,
        query.statuses === undefined ? undefined : inArray(receipts.status, query.statuses),
        sinceCursor,
      ),
    )
    .orderBy(asc(changedAt), asc(receipts.receiptId))
    .limit(query.limit + 1);
}

/** The answer from the first `limit + 1` changes (oldest first) read at `now`. */
export function changesPage(
  rows: readonly ChangedReceipt[],
  query: Pick<ChangesQuery, "since" | "afterId" | "limit">,
  now: number,
): ChangesPage {
  const settledBefore = now - SETTLE_MS;
  const settled = rows.filter((row) => row.changedAt < settledBefore);
  if (settled.length > query.limit) {
    const page = settled.slice(0, query.limit);
    const last = page.at(-1)!;
    return { receipts: page, changesCursor: `${last.changedAt}.${last.receiptId}`, more: true, settledBefore };
  }
  const where = query.afterId === null ? String(query.since) : `${query.since}.${query.afterId}`;
  return {
    receipts: rows.slice(0, query.limit),
    changesCursor: settledBefore > query.since ? String(settledBefore) : where,
    more: false,
    settledBefore,
  };
}
