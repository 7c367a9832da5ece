import { execCounted } from "../lib/meter";

/**
 * Live duplicate deliveries per source and hour, tallied in the shard that answered them. Duplicates never reach
 * D1 (the acknowledgement path writes nothing there), so this shard-local tally is their only count.
 */

const HOUR_MS = 3_600_000;

export type DuplicateCount = {
  source: string;
  /** Start of the hour, epoch ms. */
  hour: number;
  deliveries: number;
};

/** Inside the claim's transaction: one upserted row per hour, no extra round trip on the duplicate's ack. */
export function countDuplicate(sql: SqlStorage, source: string, receivedAt: number): void {
  execCounted(
    sql,
    `INSERT INTO duplicate_counts (source, hour, deliveries) VALUES (?, ?, 1)
     ON CONFLICT (source, hour) DO UPDATE SET deliveries = deliveries + 1`,
    source,
    Math.floor(receivedAt / HOUR_MS) * HOUR_MS,
  );
}

/** The tallies since `since` (epoch ms), oldest hour first. */
export function duplicateCountsSince(sql: SqlStorage, since: number): DuplicateCount[] {
  return execCounted<DuplicateCount>(
    sql,
    "SELECT source, hour, deliveries FROM duplicate_counts WHERE hour >= ? ORDER BY hour",
    Math.floor(since / HOUR_MS) * HOUR_MS,
  );
}

export function pruneDuplicateCounts(sql: SqlStorage, olderThan: number): void {
  execCounted(sql, "DELETE FROM duplicate_counts WHERE hour < ?", olderThan);
}
