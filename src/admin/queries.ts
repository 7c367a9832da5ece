import { and, asc, desc, eq, gte, inArray, lt, or, sql, type SQL } from "drizzle-orm";
import type { Database } from "../db/client";
import { alerts, attempts, quarantine, receipts } from "../db/schema";
import { decodeUtf8OrBase64 } from "./payload";
import type { ReceiptFilter } from "./filters";

/** Read-only audit queries behind both the admin API and the dashboard. Bodies only ever come back one receipt at a time. */

const receiptSummaryColumns = {
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
  payloadSha256: receipts.payloadSha256,
  bodyRetained: sql<number>`${receipts.body} IS NOT NULL`.mapWith(Boolean),
};

export type ReceiptSummary = Awaited<ReturnType<typeof searchReceipts>>["receipts"][number];

export interface Page<T> {
  receipts: T[];
  /** Pass as `before` for the next (older) page; null when this page is the last. */
  nextCursor: string | null;
}

export async function searchReceipts(db: Database, filter: ReceiptFilter) {
  const conditions: (SQL | undefined)[] = [
    filter.source !== undefined ? eq(receipts.source, filter.source) : undefined,
    filter.statuses?.length ? inArray(receipts.status, filter.statuses) : undefined,
    filter.eventType !== undefined ? eq(receipts.eventType, filter.eventType) : undefined,
    filter.eventKey !== undefined ? eq(receipts.eventKey, filter.eventKey) : undefined,
    filter.subjectId !== undefined ? eq(receipts.subjectId, filter.subjectId) : undefined,
    filter.provenance !== undefined ? eq(receipts.provenance, filter.provenance) : undefined,
    filter.receivedFrom !== undefined ? gte(receipts.receivedAt, filter.receivedFrom) : undefined,
    filter.receivedUntil !== undefined ? lt(receipts.receivedAt, filter.receivedUntil) : undefined,
    filter.before !== undefined ? lt(receipts.receiptId, filter.before) : undefined,
  ];
  // One row more than the page tells us whether another page exists without a COUNT.
  const rows = await db
    .select(receiptSummaryColumns)
    .from(receipts)
    .where(and(...conditions))
    .orderBy(desc(receipts.receiptId))
    .limit(filter.limit + 1);
  const page = rows.slice(0, filter.limit);
  return { receipts: page, nextCursor: rows.length > filter.limit ? page[page.length - 1]!.receiptId : null };
}

/** The receipt id for a provider's event key, so "what happened to event X?" is one call. */
export async function receiptIdForEvent(db: Database, source: string, eventKey: string): Promise<string | null> {
  const [row] = await db
    .select({ receiptId: receipts.receiptId })
    .from(receipts)
    .where(and(eq(receipts.source, source), eq(receipts.eventKey, eventKey)));
  return row?.receiptId ?? null;
}

export async function receiptDetail(db: Database, receiptId: string) {
  const [receipt] = await db
    .select({ ...receiptSummaryColumns, occurredAt: receipts.occurredAt, staleAgainstVersion: receipts.staleAgainstVersion, leaseUntil: receipts.leaseUntil, enqueuedAt: receipts.enqueuedAt, body: receipts.body, keptHeaders: receipts.keptHeaders })
    .from(receipts)
    .where(eq(receipts.receiptId, receiptId));
  if (!receipt) return null;
  const [attemptRows, quarantineRows] = await Promise.all([
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
      .where(or(eq(quarantine.originalReceiptId, receiptId), and(eq(quarantine.source, receipt.source), eq(quarantine.eventKey, receipt.eventKey))))
      .orderBy(asc(quarantine.quarantineId)),
  ]);
  const { body, keptHeaders, ...summary } = receipt;
  return {
    receipt: { ...summary, keptHeaders: parseHeaders(keptHeaders), body: decodeUtf8OrBase64(body) },
    attempts: attemptRows,
    quarantine: quarantineRows.map(({ body: quarantinedBody, keptHeaders: quarantinedHeaders, ...record }) => ({
      ...record,
      keptHeaders: parseHeaders(quarantinedHeaders),
      body: decodeUtf8OrBase64(quarantinedBody),
    })),
  };
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

export async function listQuarantine(db: Database, options: { source?: string; before?: string; limit: number }) {
  const rows = await db
    .select({
      quarantineId: quarantine.quarantineId,
      source: quarantine.source,
      eventKey: quarantine.eventKey,
      reason: quarantine.reason,
      originalReceiptId: quarantine.originalReceiptId,
      originalSha256: quarantine.originalSha256,
      payloadSha256: quarantine.payloadSha256,
      receivedAt: quarantine.receivedAt,
      bodyRetained: sql<number>`${quarantine.body} IS NOT NULL`.mapWith(Boolean),
    })
    .from(quarantine)
    .where(
      and(
        options.source !== undefined ? eq(quarantine.source, options.source) : undefined,
        options.before !== undefined ? lt(quarantine.quarantineId, options.before) : undefined,
      ),
    )
    .orderBy(desc(quarantine.quarantineId))
    .limit(options.limit + 1);
  const page = rows.slice(0, options.limit);
  return { quarantine: page, nextCursor: rows.length > options.limit ? page[page.length - 1]!.quarantineId : null };
}

export async function listAlerts(db: Database, options: { source?: string; state?: "open" | "resolved"; limit: number }) {
  return db
    .select({
      alertId: alerts.alertId,
      source: alerts.source,
      kind: alerts.kind,
      state: alerts.state,
      detail: alerts.detail,
      openedAt: alerts.openedAt,
      resolvedAt: alerts.resolvedAt,
    })
    .from(alerts)
    .where(
      and(
        options.source !== undefined ? eq(alerts.source, options.source) : undefined,
        options.state !== undefined ? eq(alerts.state, options.state) : undefined,
      ),
    )
    .orderBy(desc(alerts.openedAt))
    .limit(options.limit);
}
