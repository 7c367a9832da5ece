/** @module Reading receipt summaries: the columns, the filter's conditions, one database's slice of a page. */
import { and, asc, desc, eq, gt, gte, inArray, lt, or, type SQL, sql } from "drizzle-orm";
import type { Database } from "../../db/client";
import { d1NowMs } from "../../db/clock";
import { receiptEventColumns } from "../../db/receipt-columns";
import { ATTEMPTS_EVER } from "../../db/receipt-runs";
import { KEY_INDEXED, receipts } from "../../db/schema";
import { ulidFloor } from "../../lib/ulid";
import type { ReceiptFilter } from "./filters";
import { type CaughtUp, caughtUpConditions, type Direction, mergeCaughtUp, type ReceiptCursor } from "./receipt-cursor";

export const receiptSummaryColumns = {
  ...receiptEventColumns,
  status: receipts.status,
  provenance: receipts.provenance,
  /** Every attempt ever, replays included (src/db/receipt-runs.ts). */
  attempts: ATTEMPTS_EVER,
  receivedAt: receipts.receivedAt,
  relayedAt: receipts.relayedAt,
  processedAt: receipts.processedAt,
  nextAttemptAt: receipts.nextAttemptAt,
  lastError: receipts.lastError,
  replayCount: receipts.replayCount,
  payloadSha256: receipts.payloadSha256,
  bodyRetained: sql<number>`(${receipts.body} IS NOT NULL OR ${receipts.bodyLocation} IS NOT NULL)`.mapWith(Boolean),
};

function selectSummaries(db: Database, where: SQL | undefined, newestFirst: boolean, limit: number) {
  return db
    .select(receiptSummaryColumns)
    .from(receipts)
    .where(where)
    .orderBy(newestFirst ? desc(receipts.receiptId) : asc(receipts.receiptId))
    .limit(limit);
}

/** Receipts caught up behind a reader's cursor, in the order of `at` (see receipt-cursor.ts). */
function selectCaughtUp(
  db: Database,
  where: SQL | undefined,
  at: typeof receipts.relayedAt | typeof receipts.statusEnteredAt,
  limit: number,
) {
  return (
    db
      // Under a name of its own: D1 answers a batch's rows keyed by column name, and relayed_at is selected already.
      .select({ ...receiptSummaryColumns, caughtUpAt: sql<number | null>`${at}`.as("caught_up_at") })
      .from(receipts)
      .where(where)
      .orderBy(asc(at), asc(receipts.receiptId))
      .limit(limit)
  );
}

const caughtUpEntries = <T extends { caughtUpAt: number | null }>(
  rows: readonly T[],
): CaughtUp<Omit<T, "caughtUpAt">>[] => rows.map(({ caughtUpAt, ...row }) => ({ row, at: caughtUpAt ?? 0 }));

export type ReceiptSummary = Awaited<ReturnType<typeof selectSummaries>>[number];

export interface Page<T> {
  receipts: T[];
  /** Pass as `before` for the next (older) page; null when this page is the last. */
  nextCursor: string | null;
  /** Pass as `after` for the previous (newer) page; null when this page is the first. */
  prevCursor: string | null;
}

/**
 * The filter's conditions on receipts, apart from paging. `keyIndexed`: every receipt of the database read is in
 * the (source, event_key) index, as in any database but the ring's (migrations/0023), so an event-key filter names
 * the index's condition and SQLite seeks it. A ring database's receipts are mostly not in it: there the filter reads
 * the source's rows in the other conditions' range (docs/audit.md says to give since and until).
 */
export function receiptsMatching(filter: ReceiptFilter, keyIndexed = false): SQL | undefined {
  return and(
    filter.source !== undefined ? eq(receipts.source, filter.source) : undefined,
    filter.statuses?.length ? inArray(receipts.status, filter.statuses) : undefined,
    filter.eventType !== undefined ? eq(receipts.eventType, filter.eventType) : undefined,
    filter.eventKey !== undefined ? eq(receipts.eventKey, filter.eventKey) : undefined,
    filter.eventKey !== undefined && keyIndexed ? KEY_INDEXED : undefined,
    filter.subjectId !== undefined ? eq(receipts.subjectId, filter.subjectId) : undefined,
    // A token of the batch-item-ids annotation; no index, so give source and since to bound the rows read.
    filter.itemId !== undefined
      ? sql`instr(' ' || coalesce(json_extract(${receipts.keptHeaders}, '$."batch-item-ids"'), '') || ' ', ${` ${filter.itemId} `}) > 0`
      : undefined,
    // A replay keeps where the event came from; "replayed" means replayed at least once (or, from before that
    // rule, a receipt whose provenance was overwritten with it).
    filter.provenance === "replayed"
      ? or(gt(receipts.replayCount, 0), eq(receipts.provenance, "replayed"))
      : filter.provenance !== undefined
        ? eq(receipts.provenance, filter.provenance)
        : undefined,
    filter.receivedFrom !== undefined ? gte(receipts.receiptId, ulidFloor(filter.receivedFrom)) : undefined,
    filter.receivedUntil !== undefined ? lt(receipts.receiptId, ulidFloor(filter.receivedUntil)) : undefined,
  );
}

/** What one database holds for a page (receipt-pages.ts makes the page from every database's slice). */
export interface ReceiptSlice {
  /** This database's D1 clock at the read. */
  readAt: number;
  /** Receipts relayed (or entered the filtered status) behind the reader since its last read here, in catch-up order. */
  caughtUp: CaughtUp<ReceiptSummary>[];
  /** The first `limit + 1` receipts past the cursor, in the direction of travel. */
  ahead: ReceiptSummary[];
}

/**
 * One database's part of a receipt page, in one D1 batch (one snapshot): its clock, the receipts relayed behind
 * the reader since the cursor's read (receipt-cursor.ts), and the receipts ahead of the cursor inside `range`
 * (`below`: ids under the `before` cursor; `above`: ids over the `after` one). `limit + 1` rows of each, so one
 * row more than a page tells whether another page exists without a COUNT.
 */
export async function readReceiptSlice(
  db: Database,
  matching: SQL | undefined,
  at: {
    direction: Direction;
    cursor: ReceiptCursor | null;
    below?: string;
    above?: string;
    statuses?: readonly string[];
  },
  limit: number,
): Promise<ReceiptSlice> {
  const catchUp = at.cursor ? caughtUpConditions(at.cursor, at.direction, at.statuses) : null;
  const ahead = and(
    matching,
    at.below !== undefined ? lt(receipts.receiptId, at.below) : undefined,
    at.above !== undefined ? gt(receipts.receiptId, at.above) : undefined,
  );
  const [clock, late, recent, entered, rows] = await db.batch([
    db.select({ now: d1NowMs }).from(sql`(SELECT 1)`),
    selectCaughtUp(db, catchUp ? and(matching, catchUp.late) : sql`0`, receipts.relayedAt, limit + 1),
    selectCaughtUp(db, catchUp ? and(matching, catchUp.recent) : sql`0`, receipts.relayedAt, limit + 1),
    selectCaughtUp(db, catchUp?.entered ? and(matching, catchUp.entered) : sql`0`, receipts.statusEnteredAt, limit + 1),
    selectSummaries(db, ahead, at.direction === "older", limit + 1),
  ]);
  return {
    readAt: clock[0]!.now,
    caughtUp: mergeCaughtUp(caughtUpEntries(late), caughtUpEntries(recent), caughtUpEntries(entered)),
    ahead: rows,
  };
}
