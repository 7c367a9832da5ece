import { and, inArray, isNotNull, type SQL, sql } from "drizzle-orm";
import type { Database } from "../db/client";
import { FINISHED_WELL } from "../db/receipt-runs";
import { attempts, receipts } from "../db/schema";

/**
 * An attempt that finished well writes no attempt row: it lives in the receipt's own attempt_* columns
 * (src/consumers/commit/commit-statements.ts), which the replayed run's attempt overwrites. So a replay first copies
 * it into `attempts` under its own number, in the same batch and under the same condition as its reset: the
 * timeline keeps every attempt of every run, and the count of attempts (src/db/receipt-runs.ts) matches
 * the attempts it lists. A number that already has its row (a leased attempt's) keeps it.
 */
export function keepOwnAttempt(db: Database, resetting: SQL | undefined) {
  const error = sql<string | null>`CASE ${receipts.status}
    WHEN 'stale' THEN 'stale against version ' || ${receipts.staleAgainstVersion} || COALESCE(': ' || ${receipts.lastError}, '')
    WHEN 'skipped' THEN ${receipts.lastError} END`;
  return db
    .insert(attempts)
    .select(
      db
        .select({
          receiptId: receipts.receiptId,
          attemptNumber: sql<number>`${receipts.leaseGeneration}`.as("attempt_number"),
          startedAt: sql<number>`${receipts.attemptStartedAt}`.as("started_at"),
          finishedAt: sql<number>`${receipts.attemptStartedAt} + COALESCE(${receipts.attemptDurationMs}, 0)`.as(
            "finished_at",
          ),
          outcome: sql<"processed" | "stale" | "skipped">`${receipts.status}`.as("outcome"),
          httpStatus: sql<number | null>`${receipts.attemptHttpStatus}`.as("http_status"),
          error: error.as("error"),
          durationMs: sql<number | null>`${receipts.attemptDurationMs}`.as("duration_ms"),
        })
        .from(receipts)
        .where(
          and(
            resetting,
            inArray(receipts.status, [...FINISHED_WELL]),
            isNotNull(receipts.attemptStartedAt),
            sql`${receipts.leaseGeneration} > 0`,
          ),
        ),
    )
    .onConflictDoNothing();
}
