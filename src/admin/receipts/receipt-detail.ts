/** @module One receipt in full, found by id or event key: body, headers, attempts, replays and route outcomes (bodies only ever come back one receipt at a time). */
import { and, asc, eq, or } from "drizzle-orm";
import { BODY_INTEGRITY_FAILED, readBodies } from "../../bodies/body-reader";
import type { Database } from "../../db/client";
import { underIndexedKeys } from "../../db/receipt-keys";
import { receiptFigures } from "../../db/receipt-runs";
import { attempts, quarantine, receipts, replays } from "../../db/schema";
import { bodyDropsAtFor } from "./body-retention";
import { decodeUtf8OrBase64 } from "./payload";
import { receiptSummaryColumns } from "./receipt-slice";
import { routeOutcomes } from "./route-outcomes";

/**
 * The receipt id for a provider's event key, so "what happened to event X?" is one call: one seek in the (source,
 * event_key) index. A shard-arbitrated receipt is not in it; ./receipt-by-key.ts asks its claim shard first.
 */
export async function receiptIdForEvent(db: Database, source: string, eventKey: string): Promise<string | null> {
  const [row] = await db
    .select({ receiptId: receipts.receiptId })
    .from(receipts)
    .where(underIndexedKeys(source, [eventKey]));
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
      payloadSha256: receipts.payloadSha256,
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
    readBodies(
      env,
      receipt.bodyLocation === null
        ? []
        : [{ receiptId, bodyLocation: receipt.bodyLocation, payloadSha256: receipt.payloadSha256 }],
    ),
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
  const body = bodyLocation === null ? rowBody : (stored.bodies.get(receiptId) ?? null);
  const corrupt = stored.corrupt.has(receiptId);
  // A body in R2 whose object is gone was dropped by retention (a segment goes whole, leaving its rows' locations).
  const bodyRetained = summary.bodyRetained && (bodyLocation === null || body !== null || corrupt);
  const attemptsListed = withLatestAttempt(attemptRows, receipt);
  const replaysListed = withLatestReplay(replayRows, receipt);
  const { runs, ...figures } = receiptFigures(receipt, replaysListed, attemptsListed);
  return {
    receipt: {
      ...summary,
      /** attempts (ever), attemptsSinceReplay and receivedToFinishedMs, as src/db/receipt-runs.ts defines them. */
      ...figures,
      bodyRetained,
      bodyLocation,
      /** Set when the stored bytes no longer hash to payload_sha256: the body is not shown (nor sent). */
      bodyProblem: corrupt ? BODY_INTEGRITY_FAILED : null,
      bodyDropsAt: bodyDropsAtFor(env, { ...summary, bodyRetained, bodyLocation }),
      keptHeaders: parseHeaders(keptHeaders),
      body: decodeUtf8OrBase64(body),
    },
    attempts: attemptsListed,
    /** Each route's delivery and its outcome, and the status across them (route-outcomes.ts). */
    routes: routes.routes,
    summary: routes.summary,
    /** Every replay, oldest first (see replaysOf), with when its run finished well and how long it took. */
    replays: replaysListed.map(({ previousProcessedAt: _, ...replay }, index) => ({
      ...replay,
      finishedAt: runs[index + 1]!.finishedAt,
      durationMs: runs[index + 1]!.durationMs,
    })),
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
      previousProcessedAt: replays.previousProcessedAt,
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
  previousProcessedAt: number | null;
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
    {
      replayNumber: receipt.replayCount,
      replayedAt: receipt.replayedAt,
      previousStatus: null,
      requestedBy: null,
      previousProcessedAt: null,
    },
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
