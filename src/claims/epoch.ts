import { execCounted } from "../lib/meter";
import { partitionTable } from "./partitions";

/**
 * A shard's side of a shard epoch (./epoch-config.ts): the keys it hands over as a previous owner, the keys it
 * adopts as a new owner, and the epochs it has been told are closed (after which its claims stop consulting).
 *
 * A key is handed over as a tombstone only (key, payload hash, receipt id, time, provenance): never a body, and
 * never the duty to relay it, which stays with the shard that accepted it.
 */

/** One row per epoch closed in this shard (a few per deployment's lifetime, so never pruned). */
export const EPOCHS_SCHEMA = `
CREATE TABLE IF NOT EXISTS claim_epochs (
  epoch TEXT PRIMARY KEY,
  closed_at INTEGER NOT NULL
) WITHOUT ROWID;`;

/** What a new owner needs to answer for a key exactly as its previous owner would. */
export interface KnownKey {
  claimKey: string;
  receiptId: string;
  payloadSha256: string;
  receivedAt: number;
  provenance: string;
}

/**
 * Where a handover has got to in one previous shard: claims still waiting for their relay first, then tombstones.
 * In that order a claim relayed during the handover is still met (as a tombstone, later); a tombstone never goes
 * back to waiting.
 */
export interface HandoverCursor {
  relayPending: 0 | 1;
  afterKey: string;
}

export const HANDOVER_START: HandoverCursor = { relayPending: 1, afterKey: "" };

export function readClosedEpochs(sql: SqlStorage): Set<string> {
  return new Set(execCounted<{ epoch: string }>(sql, "SELECT epoch FROM claim_epochs").map((row) => row.epoch));
}

export function recordClosedEpoch(sql: SqlStorage, epoch: string, now: number): void {
  execCounted(sql, "INSERT OR IGNORE INTO claim_epochs (epoch, closed_at) VALUES (?, ?)", epoch, now);
}

/** Generations of the partitions kept, newest first, as ./shard.ts holds them. */
type Generations = readonly { generation: number }[];

/** A key as this shard holds it, in any partition kept, whether relayed yet or not. */
export function knownKey(sql: SqlStorage, partitions: Generations, source: string, claimKey: string): KnownKey | null {
  return (
    execCounted<KnownKey & Record<string, SqlStorageValue>>(
      sql,
      partitions
        .map(
          ({ generation }) => `SELECT event_key AS claimKey, receipt_id AS receiptId, payload_sha256 AS payloadSha256,
           received_at AS receivedAt, provenance FROM ${partitionTable(generation)}
           WHERE relay_pending IN (0, 1) AND source = ?1 AND event_key = ?2`,
        )
        .join(" UNION ALL "),
      source,
      claimKey,
    )[0] ?? null
  );
}

/**
 * Writes a key learnt from its previous owner as a tombstone in the open partition (the caller has found it not
 * held here). Its `received_at` is the first copy's, so retention forgets it when the previous owner would have,
 * never sooner: the partition it lands in is closed by its newest claim.
 */
export function insertTombstone(sql: SqlStorage, partitions: Generations, source: string, key: KnownKey): void {
  execCounted(
    sql,
    `INSERT INTO ${partitionTable(partitions[0]!.generation)} (relay_pending, source, event_key, receipt_id, payload_sha256,
       received_at, provenance) VALUES (0, ?, ?, ?, ?, ?, ?)`,
    source,
    key.claimKey,
    key.receiptId,
    key.payloadSha256,
    key.receivedAt,
    key.provenance,
  );
}

/**
 * The next `limit` keys after `cursor`, in key order merged across partitions (each arm a seek on its key prefix),
 * and the cursor after them: null once the last page has been read.
 */
export function handoverPage(
  sql: SqlStorage,
  partitions: Generations,
  source: string,
  cursor: HandoverCursor,
  limit: number,
): { keys: KnownKey[]; next: HandoverCursor | null } {
  const keys = execCounted<KnownKey & Record<string, SqlStorageValue>>(
    sql,
    `${partitions
      .map(
        ({ generation }) => `SELECT event_key AS claimKey, receipt_id AS receiptId, payload_sha256 AS payloadSha256,
         received_at AS receivedAt, provenance FROM ${partitionTable(generation)}
         WHERE relay_pending = ?1 AND source = ?2 AND event_key > ?3`,
      )
      .join(" UNION ALL ")} ORDER BY claimKey LIMIT ?4`,
    cursor.relayPending,
    source,
    cursor.afterKey,
    limit,
  );
  const last = keys.at(-1);
  if (last && keys.length === limit)
    return { keys, next: { relayPending: cursor.relayPending, afterKey: last.claimKey } };
  return { keys, next: cursor.relayPending === 1 ? { relayPending: 0, afterKey: "" } : null };
}
