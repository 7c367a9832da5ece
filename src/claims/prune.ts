import { execCounted } from "../lib/meter";

/**
 * Forgetting a shard's dedupe tombstones once their key is past the source's dedupe retention.
 *
 * Tombstones are keyed (relay_pending = 0, source, event_key): key order, which says nothing about age. A query
 * for "received before the cutoff" would read every tombstone to find the few that expired, and an index by
 * time (or by the receipt id, a ULID minted at received_at) would cost a written row on every claim and every
 * relay. So pruning walks the keys instead: each visit reads the next slice of tombstones from where the last
 * visit stopped (`prune_cursor`, one row, in shard-schema.ts), deletes the expired ones among them, and wraps around at the end.
 *
 * Rows read per visit: at most `readLimit` tombstones plus one per key deleted. Every tombstone is read once per
 * pass over the table, so a key outlives its retention by at most one pass: ⌈tombstones ÷ readLimit⌉ visits.
 * A shard holding fewer than `readLimit` tombstones is passed over whole on every visit.
 */

interface KeyPosition {
  source: string;
  eventKey: string;
}

/** Before every key: the empty source sorts first. */
const START: KeyPosition = { source: "", eventKey: "" };

type TombstoneAge = { source: string; event_key: string; received_at: number };

type Storage = Pick<DurableObjectStorage, "sql" | "transactionSync">;

/**
 * `keep`: claim keys never forgotten this visit whatever their age, the receipts still unfinished in D1 (the cron's
 * key scan lists them, src/reconcile/retention-scan.ts): their resend must still answer "duplicate".
 */
export function pruneExpiredKeys(
  storage: Storage,
  olderThan: number,
  options: { readLimit: number; pageSize: number; keep?: ReadonlySet<string> },
): number {
  const { sql } = storage;
  const startedFrom = readCursor(sql);
  let position = startedFrom;
  let wrapped = false;
  let read = 0;
  let pruned = 0;
  while (read < options.readLimit) {
    const want = Math.min(options.pageSize, options.readLimit - read);
    // After wrapping, the walk stops at the key this visit began after: every tombstone is read once per visit.
    // The bound is part of the key range (a seek), so the scan never reads on past it.
    const page = wrapped
      ? execCounted<TombstoneAge>(
          sql,
          `SELECT source, event_key, received_at FROM event_claims
           WHERE relay_pending = 0 AND (source, event_key) > (?1, ?2) AND (source, event_key) <= (?3, ?4)
           ORDER BY relay_pending, source, event_key LIMIT ?5`,
          position.source,
          position.eventKey,
          startedFrom.source,
          startedFrom.eventKey,
          want,
        )
      : execCounted<TombstoneAge>(
          sql,
          `SELECT source, event_key, received_at FROM event_claims
           WHERE relay_pending = 0 AND (source, event_key) > (?1, ?2)
           ORDER BY relay_pending, source, event_key LIMIT ?3`,
          position.source,
          position.eventKey,
          want,
        );
    read += page.length;
    const expired = page.filter((row) => row.received_at < olderThan && !options.keep?.has(row.event_key));
    if (expired.length > 0) {
      storage.transactionSync(() => {
        for (const row of expired) {
          execCounted(
            sql,
            "DELETE FROM event_claims WHERE relay_pending = 0 AND source = ? AND event_key = ?",
            row.source,
            row.event_key,
          );
        }
      });
      pruned += expired.length;
    }
    const last = page.at(-1);
    if (page.length === want && last) {
      position = { source: last.source, eventKey: last.event_key };
      continue;
    }
    // The end of the table (or, after wrapping, this visit's starting point): the next pass starts at the top.
    position = START;
    if (wrapped || isStart(startedFrom)) break;
    wrapped = true;
  }
  writeCursor(sql, position);
  return pruned;
}

function isStart(position: KeyPosition): boolean {
  return position.source === START.source && position.eventKey === START.eventKey;
}

function readCursor(sql: SqlStorage): KeyPosition {
  const row = execCounted<{ source: string; event_key: string }>(sql, "SELECT source, event_key FROM prune_cursor")[0];
  return row ? { source: row.source, eventKey: row.event_key } : START;
}

function writeCursor(sql: SqlStorage, position: KeyPosition): void {
  execCounted(
    sql,
    `INSERT INTO prune_cursor (singleton, source, event_key) VALUES (1, ?, ?)
     ON CONFLICT (singleton) DO UPDATE SET source = excluded.source, event_key = excluded.event_key`,
    position.source,
    position.eventKey,
  );
}
