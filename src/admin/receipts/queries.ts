import { and, asc, desc, eq, gt, gte, inArray, lt, or, type SQL, sql } from "drizzle-orm";
import { readStoredBodies } from "../../bodies/stored-bodies";
import type { Database } from "../../db/client";
import { d1NowMs } from "../../db/clock";
import { attempts, quarantine, receipts, replays } from "../../db/schema";
import { ulidFloor } from "../../lib/ulid";
import { bodyDropsAtFor } from "./body-retention";
import type { ReceiptFilter } from "./filters";
import { decodeUtf8OrBase64 } from "./payload";
import {
  type CaughtUp,
  caughtUpConditions,
  type Direction,
  mergeCaughtUp,
  type ReceiptCursor,
  relayedSinceRead,
} from "./receipt-cursor";
import { routeOutcomes } from "./route-outcomes";

/** Read-only audit queries behind both the admin API and the dashboard. Bodies only ever come back one receipt at a time. */

export const receiptSummaryColumns = {
  receiptId: receipts.receiptId,
  source: receipts.source,
  eventKey: receipts.eventKey,
  eventType: receipts.eventType,
  subjectId: receipts.subjectId,
  version: receipts.version,
  status: receipts.status,
  provenance: receipts.provenance,
  attempts: receipts.attempts,
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

/** The filter's conditions on receipts, apart from paging. */
export function receiptsMatching(filter: ReceiptFilter): SQL | undefined {
  return and(
    filter.source !== undefined ? eq(receipts.source, filter.source) : undefined,
    filter.statuses?.length ? inArray(receipts.status, filter.statuses) : undefined,
    filter.eventType !== undefined ? eq(receipts.eventType, filter.eventType) : undefined,
    filter.eventKey !== undefined ? eq(receipts.eventKey, filter.eventKey) : undefined,
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

/** The receipt id for a provider's event key, so "what happened to event X?" is one call. */
export async function receiptIdForEvent(db: Database, source: string, eventKey: string): Promise<string | null> {
  const [row] = await db
    .select({ receiptId: receipts.receiptId })
    .from(receipts)
    .where(and(eq(receipts.source, source), eq(receipts.eventKey, eventKey)));
  return row?.receiptId ?? null;
}

/**
 * `env.BODIES` is where large bodies live (the BODIES bucket, src/bodies/stored-bodies.ts); `env.SOURCES` says when
 * retention drops the body (`bodyDropsAt`).
 */
export async function receiptDetail(
  db: Database,
  receiptId: string,
  env: { BODIES?: R2Bucket; SOURCES?: Env["SOURCES"] } = {},
) {
  const [receipt] = await db
    .select({
      ...receiptSummaryColumns,
      occurredAt: receipts.occurredAt,
      staleAgainstVersion: receipts.staleAgainstVersion,
      leaseUntil: receipts.leaseUntil,
      leaseGeneration: receipts.leaseGeneration,
      committedAt: receipts.committedAt,
      replayCount: receipts.replayCount,
      replayedAt: receipts.replayedAt,
      dismissedAt: receipts.dismissedAt,
      restoredAt: receipts.restoredAt,
      route: receipts.route,
      filteredRoutes: receipts.filteredRoutes,
      attemptStartedAt: receipts.attemptStartedAt,
      attemptDurationMs: receipts.attemptDurationMs,
      attemptHttpStatus: receipts.attemptHttpStatus,
      body: receipts.body,
      bodyLocation: receipts.bodyLocation,
      keptHeaders: receipts.keptHeaders,
    })
    .from(receipts)
    .where(eq(receipts.receiptId, receiptId));
  if (!receipt) return null;
  const [attemptRows, quarantineRows, stored, replayRows, routes] = await Promise.all([
    db
      .select({
        attemptNumber: attempts.attemptNumber,
        startedAt: attempts.startedAt,
        finishedAt: attempts.finishedAt,
        outcome: attempts.outcome,
        httpStatus: attempts.httpStatus,
        error: attempts.error,
        durationMs: attempts.durationMs,
      })
      .from(attempts)
      .where(eq(attempts.receiptId, receiptId))
      .orderBy(asc(attempts.attemptNumber)),
    db
      .select()
      .from(quarantine)
      .where(
        or(
          eq(quarantine.originalReceiptId, receiptId),
          and(eq(quarantine.source, receipt.source), eq(quarantine.eventKey, receipt.eventKey)),
        ),
      )
      .orderBy(asc(quarantine.quarantineId)),
    readStoredBodies(env, receipt.bodyLocation === null ? [] : [receiptId]),
    receipt.replayCount === 0 ? [] : replaysOf(db, receiptId),
    routeOutcomes(db, { ...receipt, receiptId }, receipt.attemptHttpStatus),
  ]);
  const {
    body: rowBody,
    bodyLocation,
    keptHeaders,
    attemptStartedAt,
    attemptDurationMs,
    attemptHttpStatus,
    ...summary
  } = receipt;
  const body = bodyLocation === null ? rowBody : (stored.get(receiptId) ?? null);
  return {
    receipt: {
      ...summary,
      bodyLocation,
      bodyDropsAt: bodyDropsAtFor(env, summary),
      keptHeaders: parseHeaders(keptHeaders),
      body: decodeUtf8OrBase64(body),
    },
    attempts: withLatestAttempt(attemptRows, receipt),
    /** Each route's delivery and its outcome, and the status across them (route-outcomes.ts). */
    routes: routes.routes,
    summary: routes.summary,
    /** Every replay, oldest first (see replaysOf). */
    replays: withLatestReplay(replayRows, receipt),
    quarantine: quarantineRows.map(({ body: quarantinedBody, keptHeaders: quarantinedHeaders, ...record }) => ({
      ...record,
      keptHeaders: parseHeaders(quarantinedHeaders),
      body: decodeUtf8OrBase64(quarantinedBody),
    })),
  };
}

/**
 * Every replay of a receipt, oldest first: one primary-key range of `replays`. A receipt replayed before the table
 * existed (migrations/0006) has fewer rows than its replay_count; its latest replay is still the receipt's
 * replayed_at, so it is listed from there, with what is not known left null.
 */
async function replaysOf(db: Database, receiptId: string): Promise<ReplayRow[]> {
  return db
    .select({
      replayNumber: replays.replayNumber,
      replayedAt: replays.replayedAt,
      previousStatus: replays.previousStatus,
      requestedBy: replays.requestedBy,
    })
    .from(replays)
    .where(eq(replays.receiptId, receiptId))
    .orderBy(asc(replays.replayNumber));
}

export type ReplayRow = {
  replayNumber: number;
  replayedAt: number;
  previousStatus: string | null;
  requestedBy: string | null;
};

export function withLatestReplay(
  rows: ReplayRow[],
  receipt: { replayCount: number; replayedAt: number | null },
): ReplayRow[] {
  if (
    receipt.replayCount === 0 ||
    receipt.replayedAt === null ||
    rows.some((row) => row.replayNumber === receipt.replayCount)
  )
    return rows;
  return [
    ...rows,
    { replayNumber: receipt.replayCount, replayedAt: receipt.replayedAt, previousStatus: null, requestedBy: null },
  ];
}

type AttemptRow = {
  attemptNumber: number;
  startedAt: number;
  finishedAt: number | null;
  outcome: string | null;
  httpStatus: number | null;
  error: string | null;
  durationMs: number | null;
};

/**
 * Attempt rows are written only for attempts that failed or ended unusually; a successful one lives in the
 * receipt's own attempt_* columns. The timeline shows it in its place all the same.
 */
export function withLatestAttempt(
  rows: AttemptRow[],
  receipt: {
    leaseGeneration: number;
    status: string;
    lastError: string | null;
    staleAgainstVersion: number | null;
    attemptStartedAt: number | null;
    attemptDurationMs: number | null;
    attemptHttpStatus: number | null;
  },
): AttemptRow[] {
  const finishedOk = ["processed", "stale", "skipped"].includes(receipt.status);
  if (
    !finishedOk ||
    receipt.attemptStartedAt === null ||
    rows.some((row) => row.attemptNumber === receipt.leaseGeneration)
  )
    return rows;
  const error =
    receipt.status === "stale"
      ? [`stale against version ${receipt.staleAgainstVersion}`, receipt.lastError].filter(Boolean).join(": ")
      : receipt.status === "skipped"
        ? receipt.lastError
        : null;
  const latest: AttemptRow = {
    attemptNumber: receipt.leaseGeneration,
    startedAt: receipt.attemptStartedAt,
    finishedAt: receipt.attemptStartedAt + (receipt.attemptDurationMs ?? 0),
    outcome: receipt.status,
    httpStatus: receipt.attemptHttpStatus,
    error,
    durationMs: receipt.attemptDurationMs,
  };
  return [...rows, latest].sort((a, b) => a.attemptNumber - b.attemptNumber);
}

export type ReceiptDetail = NonNullable<Awaited<ReturnType<typeof receiptDetail>>>;

function parseHeaders(kept: string | null): Record<string, string> | null {
  if (kept === null) return null;
  try {
    return JSON.parse(kept) as Record<string, string>;
  } catch {
    return null;
  }
}

const quarantineColumns = {
  quarantineId: quarantine.quarantineId,
  source: quarantine.source,
  eventKey: quarantine.eventKey,
  reason: quarantine.reason,
  originalReceiptId: quarantine.originalReceiptId,
  originalSha256: quarantine.originalSha256,
  payloadSha256: quarantine.payloadSha256,
  receivedAt: quarantine.receivedAt,
  relayedAt: quarantine.relayedAt,
  bodyRetained: sql<number>`${quarantine.body} IS NOT NULL`.mapWith(Boolean),
};

/**
 * One database's part of a quarantine page (newest first), in one D1 batch: its clock, the rows relayed behind the
 * reader since the cursor's read (through the `quarantine_relayed_at` index, in the order they were relayed), and
 * the `limit + 1` rows below the cursor's id. receipt-cursor.ts has the argument: it holds here as for receipts.
 */
export async function readQuarantineSlice(
  db: Database,
  options: { source?: string; cursor: ReceiptCursor | null; limit: number },
) {
  const ofSource = options.source !== undefined ? eq(quarantine.source, options.source) : undefined;
  const since = options.cursor ? relayedSinceRead(options.cursor, quarantine.relayedAt, quarantine.quarantineId) : null;
  const [clock, caughtUp, ahead] = await db.batch([
    db.select({ now: d1NowMs }).from(sql`(SELECT 1)`),
    db
      .select(quarantineColumns)
      .from(quarantine)
      .where(since ? and(ofSource, since, gt(quarantine.quarantineId, options.cursor!.receiptId)) : sql`0`)
      .orderBy(asc(quarantine.relayedAt), asc(quarantine.quarantineId))
      .limit(options.limit + 1),
    db
      .select(quarantineColumns)
      .from(quarantine)
      .where(and(ofSource, options.cursor ? lt(quarantine.quarantineId, options.cursor.receiptId) : undefined))
      .orderBy(desc(quarantine.quarantineId))
      .limit(options.limit + 1),
  ]);
  return { readAt: clock[0]!.now, caughtUp: caughtUp.map((row) => ({ row, at: row.relayedAt ?? 0 })), ahead };
}

export type QuarantineRow = Awaited<ReturnType<typeof readQuarantineSlice>>["ahead"][number];
export type QuarantineList = { quarantine: QuarantineRow[]; nextCursor: string | null };
