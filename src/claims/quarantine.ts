import { execCounted } from "../lib/meter";
import { ulid } from "../lib/ulid";
import type { ClaimRequest, PendingQuarantine } from "../model/claims";

/**
 * A claim shard's quarantine: what it keeps of a delivery that reuses a signed key with other bytes.
 *
 * Anyone holding one captured delivery of a sender whose signature leaves room for other spellings of the same key
 * (an Adyen item in another batch, a Mailgun token beside other event data, a Twilio idempotency token reused) can
 * send that key with as many different bodies as it likes. Each would be a whole body kept for a human. So a key
 * keeps its first QUARANTINE_KEPT_COPIES distinct copies whole (`quarantine_outbox`, one row each), and every copy
 * past them only adds one to the key's counter row (`quarantine_overflow`: no body, no headers, the latest copy's
 * hash; both tables in ./shard-schema.ts). Storage per key is then bounded whatever is sent, and nothing is dropped
 * uncounted: the counter reaches D1 as one `quarantine` row whose `copies` says how many deliveries it stands for.
 *
 * A kept copy sent again is recognised by its hash and adds nothing. A copy past the cap is not remembered, so the
 * counter counts deliveries, not distinct bodies: a resend of one adds one again.
 */
export const QUARANTINE_KEPT_COPIES = 3;

export type QuarantineStep = "already-kept" | "keep-whole" | "count-only";

/** What to do with one more copy of a key with other bytes, from what the key already keeps. */
export function quarantineStep(kept: { copies: number; holdsThisHash: boolean }): QuarantineStep {
  if (kept.holdsThisHash) return "already-kept";
  return kept.copies < QUARANTINE_KEPT_COPIES ? "keep-whole" : "count-only";
}

/** The key's original, as the shard holds it. */
export interface OriginalClaim {
  receiptId: string;
  payloadSha256: string;
}

/**
 * Records a copy of `request`'s key with other bytes: kept whole, counted, or (a kept copy again) nothing. One
 * read of the key's kept copies (at most QUARANTINE_KEPT_COPIES rows, by the UNIQUE index's prefix) and one write
 * at most, inside the claim's turn.
 */
export function quarantineCopy(sql: SqlStorage, request: ClaimRequest, original: OriginalClaim): void {
  const kept = execCounted<{ copies: number; holds_this_hash: number }>(
    sql,
    `SELECT COUNT(*) AS copies, COALESCE(MAX(payload_sha256 = ?3), 0) AS holds_this_hash
     FROM quarantine_outbox WHERE source = ?1 AND event_key = ?2`,
    request.source,
    request.eventKey,
    request.payloadSha256,
  )[0]!;
  const step = quarantineStep({ copies: kept.copies, holdsThisHash: kept.holds_this_hash === 1 });
  if (step === "already-kept") return;
  if (step === "keep-whole") {
    execCounted(
      sql,
      `INSERT INTO quarantine_outbox (quarantine_id, source, event_key, original_receipt_id, original_sha256,
         payload_sha256, body, kept_headers, received_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (source, event_key, payload_sha256) DO NOTHING`,
      ulid(request.receivedAt),
      request.source,
      request.eventKey,
      original.receiptId,
      original.payloadSha256,
      request.payloadSha256,
      request.body,
      request.keptHeaders,
      request.receivedAt,
    );
    return;
  }
  execCounted(
    sql,
    `INSERT INTO quarantine_overflow (source, event_key, quarantine_id, original_receipt_id, original_sha256,
       payload_sha256, copies, received_at) VALUES (?, ?, ?, ?, ?, ?, 1, ?)
     ON CONFLICT (source, event_key) DO UPDATE SET copies = copies + 1, payload_sha256 = excluded.payload_sha256,
       relayed_at = NULL`,
    request.source,
    request.eventKey,
    ulid(request.receivedAt),
    original.receiptId,
    original.payloadSha256,
    request.payloadSha256,
    request.receivedAt,
  );
}

/** A quarantine the relay carries, and which shard table it came from (for marking it relayed). */
export type WaitingQuarantine = PendingQuarantine & { counted: 0 | 1 };

/**
 * The unrelayed quarantines, oldest first: kept copies and changed counters, each through its partial index of the
 * backlog. Read off a cursor by the relay, which stops at its byte budget.
 */
export const WAITING_QUARANTINES = `
  SELECT quarantine_id AS quarantineId, source, event_key AS eventKey, original_receipt_id AS originalReceiptId,
    original_sha256 AS originalSha256, payload_sha256 AS payloadSha256, body, kept_headers AS keptHeaders,
    received_at AS receivedAt, 1 AS copies, 0 AS counted
  FROM quarantine_outbox WHERE relayed_at IS NULL
  UNION ALL
  SELECT quarantine_id, source, event_key, original_receipt_id, original_sha256, payload_sha256, NULL, NULL,
    received_at, copies, 1
  FROM quarantine_overflow WHERE relayed_at IS NULL
  ORDER BY receivedAt LIMIT ?`;

/**
 * After the relay put it in D1: a kept copy loses its body and headers and stays as its hash (so a resend is
 * recognised, not kept again); a counter is marked relayed only if no copy was counted while the relay was away,
 * else it stays in the backlog and the next relay carries the higher count.
 */
export function markQuarantineRelayed(sql: SqlStorage, quarantine: WaitingQuarantine, relayedAt: number): void {
  if (quarantine.counted === 1) {
    execCounted(
      sql,
      "UPDATE quarantine_overflow SET relayed_at = ? WHERE source = ? AND event_key = ? AND copies = ?",
      relayedAt,
      quarantine.source,
      quarantine.eventKey,
      quarantine.copies,
    );
    return;
  }
  execCounted(
    sql,
    "UPDATE quarantine_outbox SET relayed_at = ?, body = NULL, kept_headers = NULL WHERE quarantine_id = ?",
    relayedAt,
    quarantine.quarantineId,
  );
}

/** Quarantines not yet in D1, counted up to `cap` (the partial indexes of each backlog). */
export const UNRELAYED_QUARANTINES = `(SELECT COUNT(*) FROM (SELECT 1 FROM quarantine_outbox WHERE relayed_at IS NULL LIMIT ?1))
  + (SELECT COUNT(*) FROM (SELECT 1 FROM quarantine_overflow WHERE relayed_at IS NULL LIMIT ?1))`;

/** Forgets relayed quarantines received before `olderThan`: kept copies' hashes and counters alike. */
export function pruneQuarantine(sql: SqlStorage, olderThan: number): void {
  execCounted(sql, "DELETE FROM quarantine_outbox WHERE relayed_at IS NOT NULL AND received_at < ?", olderThan);
  execCounted(sql, "DELETE FROM quarantine_overflow WHERE relayed_at IS NOT NULL AND received_at < ?", olderThan);
}
