import { countCursor, execCounted } from "../lib/meter";
import type { ClaimRequest, PendingClaim } from "../model/claims";
import { partitionTable } from "./partitions";

/**
 * The claims' own rows across a shard's time partitions (./partitions.ts): the claim insert, the relay's read of its
 * batch, the update that turns a relayed claim into its dedupe tombstone, and the reads the cron and tests make.
 * The shard (./shard.ts) runs each of these inside its single-threaded turns.
 *
 * Billed rows per accepted event: the claim insert (1, a WITHOUT ROWID table with no other index) and the relay's
 * update that turns it into a tombstone (1); the tombstone is later forgotten with its whole time partition, a DROP
 * TABLE that writes no row. The same for a source whose key the signature does not cover: its claims are keyed by
 * the payload hash (claimKeyOf) in the same table, so a replay under a new key finds the first copy here without any
 * other row or index.
 */

export const RELAY_BATCH = 50;
/**
 * Bodies per relay, in bytes. Each body may be up to a source's cap (1 MiB by default), and the relay holds a
 * batch in memory twice (the rows, then the D1 parameters): without a byte bound, 50 large bodies would exceed
 * a Worker's 128 MB. At least one row always goes, whatever its size.
 */
export const RELAY_BATCH_BYTES = 4 * 1024 * 1024;

/** The time partitions a shard keeps, newest (where claims go) first. */
type Partitions = readonly { generation: number }[];

/** A claim waiting for its relay, and the partition that holds it (where the relay turns it into a tombstone). */
export type WaitingClaim = PendingClaim & { generation: number };

/** What a shard still knows about one claim key: its dedupe tombstone, or its claim while unrelayed. */
export type Tombstone = { receiptId: string; payloadSha256: string; hasBody: boolean; relayed: boolean };

/** One query over every partition kept, newest first (a key lives in one partition at most). */
export function acrossPartitions(partitions: Partitions, arm: (table: string) => string): string {
  return partitions.map(({ generation }) => arm(partitionTable(generation))).join(" UNION ALL ");
}

/** A new key's claim, into the open partition, waiting for its relay. */
export function insertClaim(
  sql: SqlStorage,
  partitions: Partitions,
  request: ClaimRequest,
  claimKey: string,
  receiptId: string,
): void {
  execCounted(
    sql,
    `INSERT INTO ${partitionTable(partitions[0]!.generation)} (relay_pending, source, event_key, receipt_id, payload_sha256, received_at, provenance,
       unsigned_event_key, event_type, subject, version, occurred_at, kept_headers, body)
     VALUES (1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    request.source,
    claimKey,
    receiptId,
    request.payloadSha256,
    request.receivedAt,
    request.provenance,
    claimKey === request.eventKey ? null : request.eventKey,
    request.eventType,
    request.subjectId,
    request.version,
    request.occurredAt,
    request.keptHeaders,
    request.body,
  );
}

/**
 * A relayed claim becomes its dedupe tombstone: the key, hash, receipt id, time and provenance stay until retention,
 * everything else goes.
 */
export function markRelayed(sql: SqlStorage, claim: WaitingClaim): void {
  execCounted(
    sql,
    `UPDATE ${partitionTable(claim.generation)} SET relay_pending = 0, unsigned_event_key = NULL, event_type = NULL, subject = NULL, version = NULL,
       occurred_at = NULL, kept_headers = NULL, body = NULL
     WHERE relay_pending = 1 AND source = ? AND event_key = ?`,
    claim.source,
    claim.claimKey,
  );
}

/**
 * Up to a batch of waiting claims with keys after `afterKey`: one ordered merge of every partition's backlog (each
 * arm a seek on its key prefix), stopped at the batch size or the byte budget.
 */
export function waitingClaimsAfter(sql: SqlStorage, partitions: Partitions, afterKey: string): WaitingClaim[] {
  return withinBudget<WaitingClaim>(
    sql,
    `${partitions
      .map(
        ({ generation }) => `SELECT receipt_id AS receiptId, source, event_key AS claimKey,
       COALESCE(unsigned_event_key, event_key) AS eventKey, payload_sha256 AS payloadSha256,
       event_type AS eventType, subject AS subjectId, version, occurred_at AS occurredAt, body,
       kept_headers AS keptHeaders, received_at AS receivedAt, provenance, ${generation} AS generation
     FROM ${partitionTable(generation)} WHERE relay_pending = 1 AND event_key > ?1`,
      )
      .join(" UNION ALL ")} ORDER BY source, claimKey LIMIT ?2`,
    afterKey,
    RELAY_BATCH,
  );
}

/** Claims and the given extra count (quarantines) not yet in D1, counted up to `cap`, reading only the backlog's keys. */
export function unrelayedCount(sql: SqlStorage, partitions: Partitions, plusQuarantines: string, cap: number): number {
  const row = execCounted<{ pending: number }>(
    sql,
    `SELECT (SELECT COUNT(*) FROM (${acrossPartitions(partitions, (table) => `SELECT 1 FROM ${table} WHERE relay_pending = 1`)} LIMIT ?1))
          + ${plusQuarantines} AS pending`,
    cap,
  )[0];
  return row?.pending ?? 0;
}

/** Whether the shard holds nothing at all: no claim, tombstone, quarantine or duplicate tally. */
export function holdsNothing(sql: SqlStorage, partitions: Partitions): boolean {
  const held = execCounted(
    sql,
    `${acrossPartitions(partitions, (table) => `SELECT 1 FROM ${table}`)}
     UNION ALL SELECT 1 FROM quarantine_outbox UNION ALL SELECT 1 FROM quarantine_overflow
     UNION ALL SELECT 1 FROM duplicate_counts LIMIT 1`,
  );
  return held.length === 0;
}

export function tombstoneOf(
  sql: SqlStorage,
  partitions: Partitions,
  source: string,
  claimKey: string,
): Tombstone | null {
  const row = execCounted<{ receipt_id: string; payload_sha256: string; has_body: number; relay_pending: number }>(
    sql,
    acrossPartitions(
      partitions,
      (table) => `SELECT receipt_id, payload_sha256, body IS NOT NULL AS has_body, relay_pending
       FROM ${table} WHERE relay_pending IN (0, 1) AND source = ?1 AND event_key = ?2`,
    ),
    source,
    claimKey,
  )[0];
  if (!row) return null;
  return {
    receiptId: row.receipt_id,
    payloadSha256: row.payload_sha256,
    hasBody: row.has_body === 1,
    relayed: row.relay_pending === 0,
  };
}

/** Rows off a lazy cursor until the byte budget is spent: bodies past the budget are never read. */
export function withinBudget<Row extends { body: ArrayBuffer | null }>(
  sql: SqlStorage,
  query: string,
  ...bindings: unknown[]
): Row[] {
  const cursor = sql.exec(query, ...bindings);
  const taken: Row[] = [];
  let bytes = 0;
  for (const raw of cursor) {
    const row = raw as unknown as Row;
    const size = row.body?.byteLength ?? 0;
    if (taken.length > 0 && bytes + size > RELAY_BATCH_BYTES) break;
    taken.push(row);
    bytes += size;
  }
  countCursor(cursor);
  return taken;
}
