import { execCounted } from "../lib/meter";

/**
 * A shard's claims live in time partitions, tables of one shape (`event_claims`, `event_claims_1`, …), so that
 * retention forgets expired tombstones by dropping a whole table instead of deleting them row by row.
 *
 * Why: the runtime's own meter (the cursor's `rowsWritten`, what Durable Object SQLite bills) counts a DELETE as
 * one row written per row, and a DROP TABLE as 0 whatever it holds (test/claims/partition-billing.test.ts). A
 * tombstone's delete was 1 of the 3 rows an event cost in its shard over its whole life.
 *
 * How, with `claim_partitions` the catalog (one row per partition):
 *   - claims go into the newest partition, the open one; the relay turns them into tombstones in place;
 *   - a dedupe lookup reads every partition still kept, by key (one statement of key seeks, never a scan), so a
 *     key is found wherever it lives until its partition is dropped;
 *   - the cron's visit closes the open partition once it has been open since before the dedupe cutoff (the next
 *     claims go into a new one), noting the newest `received_at` it holds, and drops a closed partition once that
 *     newest claim is older than the cutoff: every claim in it is then past dedupe retention.
 * So a partition spans about one dedupe window, at most two are kept (three for the moment of a change), and a
 * tombstone is forgotten between one and two windows after it was received: never before, as DESIGN.md's "keys
 * outlive every resend" asks, at the price of keeping up to twice the tombstones.
 *
 * Before a drop, what must outlive it moves to the open partition: claims not yet relayed (acknowledged work),
 * and `keep`, the keys of receipts still unfinished in D1 (their resend must still answer "duplicate").
 */

/** The columns a claim row has, in one order for every partition (a shard's first table got one by ALTER TABLE). */
export const CLAIM_COLUMNS = `relay_pending, source, event_key, receipt_id, payload_sha256, received_at, provenance,
  unsigned_event_key, event_type, subject, version, occurred_at, kept_headers, body`;

export function partitionTable(generation: number): string {
  return generation === 0 ? "event_claims" : `event_claims_${generation}`;
}

/** See shard-schema.ts for the key: (relay_pending, source, event_key), WITHOUT ROWID, one row per insert. */
export function claimsTableSql(generation: number): string {
  return `CREATE TABLE IF NOT EXISTS ${partitionTable(generation)} (
  relay_pending INTEGER NOT NULL,
  source TEXT NOT NULL,
  event_key TEXT NOT NULL,
  receipt_id TEXT NOT NULL,
  payload_sha256 TEXT NOT NULL,
  received_at INTEGER NOT NULL,
  provenance TEXT NOT NULL,
  unsigned_event_key TEXT,
  event_type TEXT,
  subject TEXT,
  version INTEGER,
  occurred_at INTEGER,
  kept_headers TEXT,
  body BLOB,
  PRIMARY KEY (relay_pending, source, event_key)
) WITHOUT ROWID`;
}

/**
 * `opened_at`: no claim in the partition was received before it (0 for a shard's first table, whose claims may be
 * of any age). `newest_received_at`: set when the partition is closed, after which no claim enters it.
 */
export const PARTITIONS_SCHEMA = `
CREATE TABLE IF NOT EXISTS claim_partitions (
  generation INTEGER PRIMARY KEY,
  opened_at INTEGER NOT NULL,
  newest_received_at INTEGER
);`;

interface Partition {
  generation: number;
  openedAt: number;
  newestReceivedAt: number | null;
}

type Storage = Pick<DurableObjectStorage, "sql" | "transactionSync">;

/** The partitions kept, newest (the open one) first; the shard's first table as the open one if there are none. */
export function readPartitions(sql: SqlStorage): Partition[] {
  const rows = sql
    .exec<{ generation: number; opened_at: number; newest_received_at: number | null }>(
      "SELECT generation, opened_at, newest_received_at FROM claim_partitions ORDER BY generation DESC",
    )
    .toArray();
  if (rows.length === 0) {
    sql.exec(claimsTableSql(0));
    sql.exec("INSERT INTO claim_partitions (generation, opened_at) VALUES (0, 0)");
    return [{ generation: 0, openedAt: 0, newestReceivedAt: null }];
  }
  return rows.map((row) => ({
    generation: row.generation,
    openedAt: row.opened_at,
    newestReceivedAt: row.newest_received_at,
  }));
}

/**
 * The cron's retention step for one shard: close the open partition if it is due, then drop every closed one
 * whose newest claim is older than `olderThan`. Returns the tombstones forgotten. `partitions` is updated in place.
 */
export function expirePartitions(
  storage: Storage,
  partitions: Partition[],
  olderThan: number,
  keep: ReadonlySet<string>,
): number {
  const { sql } = storage;
  const open = partitions[0]!;
  if (open.openedAt < olderThan && !isEmpty(sql, open.generation)) {
    storage.transactionSync(() => {
      const newest =
        execCounted<{ newest: number | null }>(
          sql,
          `SELECT MAX(received_at) AS newest FROM ${partitionTable(open.generation)}`,
        )[0]?.newest ?? open.openedAt;
      const next: Partition = { generation: open.generation + 1, openedAt: newest, newestReceivedAt: null };
      execCounted(
        sql,
        "UPDATE claim_partitions SET newest_received_at = ? WHERE generation = ?",
        newest,
        open.generation,
      );
      execCounted(sql, claimsTableSql(next.generation));
      execCounted(
        sql,
        "INSERT INTO claim_partitions (generation, opened_at) VALUES (?, ?)",
        next.generation,
        next.openedAt,
      );
      open.newestReceivedAt = newest;
      partitions.unshift(next);
    });
  }
  let forgotten = 0;
  for (const closed of partitions.slice(1)) {
    if (closed.newestReceivedAt === null || closed.newestReceivedAt >= olderThan) continue;
    forgotten += storage.transactionSync(() => dropPartition(sql, closed.generation, partitions[0]!.generation, keep));
    partitions.splice(partitions.indexOf(closed), 1);
  }
  return forgotten;
}

function isEmpty(sql: SqlStorage, generation: number): boolean {
  return execCounted(sql, `SELECT 1 FROM ${partitionTable(generation)} LIMIT 1`).length === 0;
}

/** Moves what must outlive the partition into the open one, then drops it. Returns the tombstones forgotten. */
function dropPartition(sql: SqlStorage, generation: number, openGeneration: number, keep: ReadonlySet<string>): number {
  const doomed = partitionTable(generation);
  const open = partitionTable(openGeneration);
  const held = execCounted<{ n: number }>(sql, `SELECT COUNT(*) AS n FROM ${doomed}`)[0]?.n ?? 0;
  let moved = execCounted<{ one: number }>(
    sql,
    `INSERT OR IGNORE INTO ${open} (${CLAIM_COLUMNS}) SELECT ${CLAIM_COLUMNS} FROM ${doomed} WHERE relay_pending = 1 RETURNING 1 AS one`,
  ).length;
  if (keep.size > 0) {
    for (const source of sourcesIn(sql, doomed)) {
      for (const key of keep) {
        moved += execCounted<{ one: number }>(
          sql,
          `INSERT OR IGNORE INTO ${open} (${CLAIM_COLUMNS}) SELECT ${CLAIM_COLUMNS} FROM ${doomed}
           WHERE relay_pending = 0 AND source = ? AND event_key = ? RETURNING 1 AS one`,
          source,
          key,
        ).length;
      }
    }
  }
  execCounted(sql, `DROP TABLE ${doomed}`);
  execCounted(sql, "DELETE FROM claim_partitions WHERE generation = ?", generation);
  return held - moved;
}

/** The sources among a partition's tombstones (one per shard), found by seeking past each in key order. */
function sourcesIn(sql: SqlStorage, table: string): string[] {
  const sources: string[] = [];
  for (;;) {
    const next = execCounted<{ source: string }>(
      sql,
      `SELECT source FROM ${table} WHERE relay_pending = 0 AND source > ? ORDER BY relay_pending, source LIMIT 1`,
      sources.at(-1) ?? "",
    )[0];
    if (!next) return sources;
    sources.push(next.source);
  }
}
