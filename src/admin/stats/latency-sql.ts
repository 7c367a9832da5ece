import { type SQL, sql } from "drizzle-orm";
import { FIRST_FINISH_SQL } from "../../db/receipt-runs";

/**
 * The latency numbers, as SQL over `receipts r` (and `attempts`, by its primary key only). A first-try success
 * writes no attempt row: its one attempt lives in the receipt's attempt_* columns. Attempt rows exist only for
 * attempts that failed or ended unusually, numbered by lease generation (the first attempt is number 1).
 */

/**
 * Pickup: received → first attempt started (claim → relay → queue → consumer). The first attempt is attempt row
 * number 1 when it failed; when it succeeded it is the receipt's own attempt, as long as no later attempt (a
 * replay) has overwritten it. Null when unknown.
 */
export const PICKUP_MS: SQL = sql.raw(`(COALESCE(
    (SELECT a.started_at FROM attempts a WHERE a.receipt_id = r.id AND a.attempt_number = 1),
    CASE WHEN r.lease_generation = 1 THEN r.attempt_started_at END
  ) - r.received_at)`);

/**
 * End to end: received → finished, the first run's, for receipts whose first run finished well (processed, stale,
 * skipped); a replay's run is not folded in (src/db/receipt-runs.ts defines it).
 */
export const END_TO_END_MS: SQL = sql.raw(`(${FIRST_FINISH_SQL} - r.received_at)`);

/**
 * Every attempt's own duration, as rows of (receipt columns…, value): attempt rows, plus the receipt's latest
 * attempt when it has no row of its own (a success). `where` filters `receipts r`.
 */
export function attemptDurations(columns: SQL, where: SQL): SQL {
  return sql`
    SELECT ${columns}, a.duration_ms AS value FROM receipts r JOIN attempts a ON a.receipt_id = r.id WHERE ${where}
    UNION ALL
    SELECT ${columns}, r.attempt_duration_ms AS value FROM receipts r
    WHERE ${where} AND r.attempt_duration_ms IS NOT NULL
      AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.receipt_id = r.id AND a.attempt_number = r.lease_generation)`;
}
