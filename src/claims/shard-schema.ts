import { EPOCHS_SCHEMA } from "./epoch";
import { PARTITIONS_SCHEMA } from "./partitions";
import { SECRET_USE_SCHEMA } from "./secret-use";

/**
 * The claim shard's SQLite schema. Claims live in time partitions of one shape (./partitions.ts: `event_claims`,
 * then `event_claims_1`, …), each keyed (relay_pending, source, event_key) WITHOUT ROWID:
 * one billed row per insert (no separate key index), the relay's backlog is the key prefix relay_pending = 1
 * (a seek, never a scan), and a dedupe lookup is two seeks per partition kept (relay_pending IN (0, 1)). Turning a claim into a
 * tombstone moves it to relay_pending = 0 in one update, which the local meters count as one row written.
 *
 * `event_key` is the claim key (src/model/claims.ts claimKeyOf): the event key when the sender's signature covers
 * it, else the payload's SHA-256, with the provider's unsigned key kept in `unsigned_event_key` until the relay
 * has given it to D1. So a source with unsigned keys dedupes on the payload hash at no extra row or index.
 * The other tables below hold what is not a claim.
 */
export const CLAIMS_SCHEMA = `
CREATE TABLE IF NOT EXISTS quarantine_outbox (
  quarantine_id TEXT PRIMARY KEY,
  source TEXT NOT NULL,
  event_key TEXT NOT NULL,
  original_receipt_id TEXT NOT NULL,
  original_sha256 TEXT NOT NULL,
  payload_sha256 TEXT NOT NULL,
  body BLOB,
  kept_headers TEXT,
  received_at INTEGER NOT NULL,
  relayed_at INTEGER,
  UNIQUE (source, event_key, payload_sha256)
);
-- The relay's quarantine backlog, found without reading the relayed copies kept until retention (a drain would
-- otherwise read them all once per batch). Only a quarantine writes it, never an accepted claim.
CREATE INDEX IF NOT EXISTS quarantine_outbox_unrelayed ON quarantine_outbox (received_at) WHERE relayed_at IS NULL;
-- A key's copies past the ones quarantine_outbox keeps whole, counted in one row (./quarantine.ts). quarantine_id
-- names its D1 row, minted with the first copy counted; received_at is that copy's time; relayed_at goes back to
-- NULL with each copy counted, until the relay has given D1 the new count.
CREATE TABLE IF NOT EXISTS quarantine_overflow (
  source TEXT NOT NULL,
  event_key TEXT NOT NULL,
  quarantine_id TEXT NOT NULL,
  original_receipt_id TEXT NOT NULL,
  original_sha256 TEXT NOT NULL,
  payload_sha256 TEXT NOT NULL,
  copies INTEGER NOT NULL,
  received_at INTEGER NOT NULL,
  relayed_at INTEGER,
  PRIMARY KEY (source, event_key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS quarantine_overflow_unrelayed ON quarantine_overflow (received_at) WHERE relayed_at IS NULL;
CREATE TABLE IF NOT EXISTS duplicate_counts (
  source TEXT NOT NULL,
  hour INTEGER NOT NULL,
  deliveries INTEGER NOT NULL,
  PRIMARY KEY (source, hour)
);
CREATE TABLE IF NOT EXISTS relay_state (
  singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
  failures INTEGER NOT NULL
);
-- Where a row-by-row prune walk resumed, before claims were kept in time partitions (./partitions.ts).
DROP TABLE IF EXISTS prune_cursor;
${PARTITIONS_SCHEMA}
${EPOCHS_SCHEMA}
${SECRET_USE_SCHEMA}`;

/**
 * Shards created before unsigned keys were keyed by payload hash have no `unsigned_event_key`: added once (a NULL
 * column, so every existing row keeps its meaning: keyed by its event key). A read of the table's columns on
 * every later start.
 */
export function migrateUnsignedKeyColumn(sql: SqlStorage): void {
  const columns = sql.exec<{ name: string }>("SELECT name FROM pragma_table_info('event_claims')").toArray();
  if (columns.some((column) => column.name === "unsigned_event_key")) return;
  sql.exec("ALTER TABLE event_claims ADD COLUMN unsigned_event_key TEXT");
}

/**
 * Shards created before event_claims kept claims in `claims` (rowid table, relayed_at column, an index): move
 * them over once, unrelayed ones still pending, and drop the old table. A no-op on every later start.
 */
export function migrateLegacyClaims(sql: SqlStorage): void {
  const legacy = sql.exec("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'claims'").toArray();
  if (legacy.length === 0) return;
  sql.exec(
    `INSERT OR IGNORE INTO event_claims (relay_pending, source, event_key, receipt_id, payload_sha256, received_at, provenance,
       event_type, subject, version, occurred_at, kept_headers, body)
     SELECT relayed_at IS NULL, source, event_key, receipt_id, payload_sha256, received_at, provenance,
       event_type, subject, version, occurred_at, kept_headers, body
     FROM claims`,
  );
  sql.exec("DROP TABLE claims");
}
