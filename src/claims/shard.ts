import { DurableObject } from "cloudflare:workers";
import { logError } from "../lib/log";
import { ulid } from "../lib/ulid";
import { isSameEvent } from "./same-event";
import { relayToD1 } from "../relay/relay";
import type { ClaimRequest, ClaimResult, PendingClaim, PendingQuarantine, RelayReport } from "./types";

/**
 * A claim shard owns a slice of one source's event keys. Durable Objects run one event at a time, and the
 * check-and-insert below is a single synchronous SQLite transaction, so two copies of one delivery cannot both
 * be "accepted" — there is no await between the check and the write for another request to slip into.
 * The RPC's answer leaves the object only after its writes are durable (the output gate), which is what lets
 * the Worker acknowledge with a 2xx.
 */

const RELAY_BATCH = 50;
/**
 * Bodies per relay, in bytes. Each body may be up to a source's cap (1 MiB by default), and the relay holds a
 * batch in memory twice (the rows, then the D1 parameters): without a byte bound, 50 large bodies would exceed
 * a Worker's 128 MB. At least one row always goes, whatever its size.
 */
export const RELAY_BATCH_BYTES = 4 * 1024 * 1024;
/** Relay soon after a claim, so a burst shares one D1 batch. */
const RELAY_DELAY_MS = 50;
const RELAY_BACKOFF_MAX_MS = 5 * 60_000;
const HOUR_MS = 3_600_000;

export type DuplicateCount = {
  source: string;
  /** Start of the hour, epoch ms. */
  hour: number;
  deliveries: number;
};

const SCHEMA = `
CREATE TABLE IF NOT EXISTS claims (
  source TEXT NOT NULL,
  event_key TEXT NOT NULL,
  receipt_id TEXT NOT NULL,
  payload_sha256 TEXT NOT NULL,
  event_type TEXT,
  subject TEXT,
  version INTEGER,
  occurred_at INTEGER,
  body BLOB,
  kept_headers TEXT,
  received_at INTEGER NOT NULL,
  provenance TEXT NOT NULL,
  relayed_at INTEGER,
  PRIMARY KEY (source, event_key)
);
CREATE INDEX IF NOT EXISTS claims_unrelayed ON claims (relayed_at, received_at);
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
`;

type ClaimRow = {
  receipt_id: string;
  payload_sha256: string;
  provenance: string;
};

export class ClaimShard extends DurableObject<Env> {
  private readonly sql: SqlStorage;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec(SCHEMA);
  }

  /** The whole claim: one synchronous transaction, no awaits until the alarm is armed. */
  async claim(request: ClaimRequest): Promise<ClaimResult> {
    const result = this.ctx.storage.transactionSync((): ClaimResult => {
      const existing = this.sql
        .exec<ClaimRow>(
          "SELECT receipt_id, payload_sha256, provenance FROM claims WHERE source = ? AND event_key = ?",
          request.source,
          request.eventKey,
        )
        .toArray()[0];
      if (!existing) {
        const receiptId = ulid(request.receivedAt);
        this.sql.exec(
          `INSERT INTO claims (source, event_key, receipt_id, payload_sha256, event_type, subject, version, occurred_at,
             body, kept_headers, received_at, provenance) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          request.source,
          request.eventKey,
          receiptId,
          request.payloadSha256,
          request.eventType,
          request.subjectId,
          request.version,
          request.occurredAt,
          request.body,
          request.keptHeaders,
          request.receivedAt,
          request.provenance,
        );
        return { disposition: "accepted", receiptId };
      }
      if (isSameEvent({ payloadSha256: existing.payload_sha256, provenance: existing.provenance }, request)) {
        if (request.provenance === "live") this.countDuplicate(request.source, request.receivedAt);
        return { disposition: "duplicate", receiptId: existing.receipt_id };
      }
      // Same key, different bytes: the sender broke its own contract. Keep it for a human, never process it.
      this.sql.exec(
        `INSERT INTO quarantine_outbox (quarantine_id, source, event_key, original_receipt_id, original_sha256,
           payload_sha256, body, kept_headers, received_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
         ON CONFLICT (source, event_key, payload_sha256) DO NOTHING`,
        ulid(request.receivedAt),
        request.source,
        request.eventKey,
        existing.receipt_id,
        existing.payload_sha256,
        request.payloadSha256,
        request.body,
        request.keptHeaders,
        request.receivedAt,
      );
      return { disposition: "quarantined", receiptId: existing.receipt_id };
    });
    if (result.disposition !== "duplicate") await this.armRelay(RELAY_DELAY_MS);
    return result;
  }

  override async alarm(): Promise<void> {
    let report: RelayReport;
    try {
      report = await this.relay();
    } catch (error) {
      // D1 or the queue is unreachable: keep everything and try again later. Acknowledged work stays here.
      const failures = this.bumpFailures();
      logError("relay.failed", error, { failures });
      await this.ctx.storage.setAlarm(Date.now() + Math.min(RELAY_BACKOFF_MAX_MS, 1000 * 2 ** Math.min(failures, 9)));
      return;
    }
    this.sql.exec("DELETE FROM relay_state");
    if (report.remaining > 0) await this.ctx.storage.setAlarm(Date.now());
  }

  /**
   * Relays one batch now. Called by the alarm, and by the cron and tests through RPC. Overlapping calls share one
   * batch: D1's awaits let a second call in, and two relays of the same rows would send each one to the queue twice.
   */
  relay(): Promise<RelayReport> {
    this.relaying ??= this.relayBatch().finally(() => {
      this.relaying = null;
    });
    return this.relaying;
  }

  private relaying: Promise<RelayReport> | null = null;

  private async relayBatch(): Promise<RelayReport> {
    const claims = withinBudget<PendingClaim>(
      this.sql.exec(
        `SELECT receipt_id AS receiptId, source, event_key AS eventKey, payload_sha256 AS payloadSha256,
           event_type AS eventType, subject AS subjectId, version, occurred_at AS occurredAt, body,
           kept_headers AS keptHeaders, received_at AS receivedAt, provenance
         FROM claims WHERE relayed_at IS NULL ORDER BY received_at LIMIT ?`,
        RELAY_BATCH,
      ),
    );
    const quarantines = withinBudget<PendingQuarantine>(
      this.sql.exec(
        `SELECT quarantine_id AS quarantineId, source, event_key AS eventKey, original_receipt_id AS originalReceiptId,
           original_sha256 AS originalSha256, payload_sha256 AS payloadSha256, body, kept_headers AS keptHeaders,
           received_at AS receivedAt
         FROM quarantine_outbox WHERE relayed_at IS NULL ORDER BY received_at LIMIT ?`,
        RELAY_BATCH,
      ),
    );

    const outcome = await relayToD1(this.env, claims, quarantines);

    // Only now, with D1 and the queue holding the work, drop the shard's copy of the body; the key and hash
    // stay behind as the dedupe tombstone until retention.
    const relayedAt = Date.now();
    this.ctx.storage.transactionSync(() => {
      for (const claim of claims) {
        this.sql.exec("UPDATE claims SET relayed_at = ?, body = NULL WHERE receipt_id = ?", relayedAt, claim.receiptId);
      }
      for (const quarantine of quarantines) {
        this.sql.exec(
          "UPDATE quarantine_outbox SET relayed_at = ?, body = NULL WHERE quarantine_id = ?",
          relayedAt,
          quarantine.quarantineId,
        );
      }
    });
    return { ...outcome, remaining: this.unrelayedCount() };
  }

  /** Claims and quarantines not yet in D1. */
  unrelayedCount(): number {
    const row = this.sql
      .exec<{ pending: number }>(
        `SELECT (SELECT COUNT(*) FROM claims WHERE relayed_at IS NULL)
              + (SELECT COUNT(*) FROM quarantine_outbox WHERE relayed_at IS NULL) AS pending`,
      )
      .one();
    return row.pending;
  }

  /**
   * Forgets keys older than the dedupe retention. Never touches an unrelayed claim: that is acknowledged work.
   * Bounded per call so one cron run stays within a Worker's limits.
   */
  pruneKeys(olderThan: number, limit = 1000): number {
    const cursor = this.sql.exec(
      `DELETE FROM claims WHERE rowid IN (
         SELECT rowid FROM claims WHERE relayed_at IS NOT NULL AND received_at < ? LIMIT ?)`,
      olderThan,
      limit,
    );
    this.sql.exec("DELETE FROM quarantine_outbox WHERE relayed_at IS NOT NULL AND received_at < ?", olderThan);
    this.sql.exec("DELETE FROM duplicate_counts WHERE hour < ?", olderThan);
    return cursor.rowsWritten;
  }

  /**
   * Live duplicate deliveries per source and hour since `since` (epoch ms), for the admin stats. Duplicates never
   * reach D1 — the acknowledgement path writes nothing there — so this shard-local tally is their only count.
   */
  duplicateCounts(since: number): DuplicateCount[] {
    return this.sql
      .exec<DuplicateCount>("SELECT source, hour, deliveries FROM duplicate_counts WHERE hour >= ? ORDER BY hour", Math.floor(since / HOUR_MS) * HOUR_MS)
      .toArray();
  }

  /** Inside the claim's transaction: one upserted row per hour, no extra round trip on the duplicate's ack. */
  private countDuplicate(source: string, receivedAt: number): void {
    this.sql.exec(
      `INSERT INTO duplicate_counts (source, hour, deliveries) VALUES (?, ?, 1)
       ON CONFLICT (source, hour) DO UPDATE SET deliveries = deliveries + 1`,
      source,
      Math.floor(receivedAt / HOUR_MS) * HOUR_MS,
    );
  }

  /**
   * The cron's visit (src/reconcile): relay what is still waiting, a bounded number of batches, then forget keys
   * past the dedupe retention. One call per shard per run, so a run's subrequests stay countable.
   */
  async sweep(keyCutoff: number, relayRounds: number, pruneLimit: number): Promise<{ relayed: number; remaining: number; keysPruned: number }> {
    let relayed = 0;
    let remaining = this.unrelayedCount();
    for (let round = 0; round < relayRounds && remaining > 0; round++) {
      const report = await this.relay();
      relayed += report.receiptsRelayed + report.quarantinesRelayed;
      remaining = report.remaining;
    }
    return { relayed, remaining, keysPruned: this.pruneKeys(keyCutoff, pruneLimit) };
  }

  /** What the shard still knows about one key: the dedupe tombstone, for the reconciler's checks and tests. */
  tombstone(source: string, eventKey: string): { receiptId: string; payloadSha256: string; hasBody: boolean; relayed: boolean } | null {
    const row = this.sql
      .exec<{ receipt_id: string; payload_sha256: string; has_body: number; relayed: number }>(
        `SELECT receipt_id, payload_sha256, body IS NOT NULL AS has_body, relayed_at IS NOT NULL AS relayed
         FROM claims WHERE source = ? AND event_key = ?`,
        source,
        eventKey,
      )
      .toArray()[0];
    if (!row) return null;
    return { receiptId: row.receipt_id, payloadSha256: row.payload_sha256, hasBody: row.has_body === 1, relayed: row.relayed === 1 };
  }

  private bumpFailures(): number {
    return this.sql
      .exec<{ failures: number }>(
        `INSERT INTO relay_state (singleton, failures) VALUES (1, 1)
         ON CONFLICT (singleton) DO UPDATE SET failures = failures + 1 RETURNING failures`,
      )
      .one().failures;
  }

  private async armRelay(delayMs: number): Promise<void> {
    const current = await this.ctx.storage.getAlarm();
    if (current === null) await this.ctx.storage.setAlarm(Date.now() + delayMs);
  }
}

/** Rows off a cursor until the byte budget is spent; the cursor is lazy, so bodies past the budget are never read. */
function withinBudget<Row extends { body: ArrayBuffer | null }>(cursor: Iterable<Record<string, SqlStorageValue>>): Row[] {
  const taken: Row[] = [];
  let bytes = 0;
  for (const raw of cursor) {
    const row = raw as unknown as Row;
    const size = row.body?.byteLength ?? 0;
    if (taken.length > 0 && bytes + size > RELAY_BATCH_BYTES) break;
    taken.push(row);
    bytes += size;
  }
  return taken;
}
