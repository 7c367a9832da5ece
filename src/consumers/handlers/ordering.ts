import type { HandlerContext, HandlerEvent, HandlerPlan } from "./types";

/**
 * Ordering by version, never by arrival (DESIGN invariant 5). A handler whose events carry a per-object version
 * — or only a timestamp — wraps its effect in `planInVersionOrder`, which applies it only when the event is
 * newer than what object_versions holds for that object.
 *
 * Two guards, because the handler's read and the consumer's batch are not one transaction: the read answers
 * the common case cheaply (an older event is stale, nothing to run), and the batch begins with a claim that
 * re-checks atomically and aborts the whole batch — effect included — when another event for the same object
 * got there first. The consumer then records the receipt as stale against the version that won.
 */

export type OrderedBy =
  /** A version or sequence the provider supplies for the object: equal means already applied. */
  | { version: number }
  /** Only a timestamp (epoch ms): equal means the order is unknown, and neither event is treated as newer. */
  | { timestamp: number };

export interface OrderedObject {
  objectType: string;
  objectId: string;
}

/** The message SQLite raises when the claim's abort statement fires; the consumer recognises it. */
export const VERSION_CLAIM_LOST = "NOT NULL constraint failed: object_versions.version";

export async function storedVersion(db: D1Database, source: string, object: OrderedObject): Promise<number | null> {
  const row = await db
    .prepare("SELECT version FROM object_versions WHERE source = ? AND object_type = ? AND object_id = ?")
    .bind(source, object.objectType, object.objectId)
    .first<{ version: number }>();
  return row?.version ?? null;
}

/**
 * Applies `effects` only if this event is newer than the stored version of `object`; otherwise plans a stale
 * outcome that names the version it lost to. The effects run in the consumer's batch after the claim.
 */
export async function planInVersionOrder(
  event: HandlerEvent,
  context: Pick<HandlerContext, "db" | "now">,
  object: OrderedObject,
  orderedBy: OrderedBy,
  effects: D1PreparedStatement[],
): Promise<HandlerPlan> {
  const incoming = "version" in orderedBy ? orderedBy.version : orderedBy.timestamp;
  if (!Number.isSafeInteger(incoming)) throw new TypeError("an ordering version must be a safe integer");
  const stored = await storedVersion(context.db, event.source, object);
  if (stored !== null && stored >= incoming) {
    if (stored === incoming && "timestamp" in orderedBy) {
      return { outcome: "stale", againstVersion: stored, note: "order unknown: same timestamp as the stored state; not applied" };
    }
    return { outcome: "stale", againstVersion: stored };
  }
  return {
    outcome: "apply",
    statements: [...versionClaimStatements(context.db, event, object, incoming, context.now), ...effects],
    versionClaim: { ...object, version: incoming },
  };
}

function versionClaimStatements(
  db: D1Database,
  event: HandlerEvent,
  object: OrderedObject,
  version: number,
  now: number,
): D1PreparedStatement[] {
  const claim = db
    .prepare(
      `INSERT INTO object_versions (source, object_type, object_id, version, receipt_id, updated_at)
       VALUES (?1, ?2, ?3, ?4, ?5, ?6)
       ON CONFLICT (source, object_type, object_id) DO UPDATE
         SET version = excluded.version, receipt_id = excluded.receipt_id, updated_at = excluded.updated_at
         WHERE object_versions.version < excluded.version`,
    )
    .bind(event.source, object.objectType, object.objectId, version, event.receiptId, now);
  // D1 batches cannot branch, so losing the claim must raise: this insert of a NULL version fires only when the
  // row is not ours, and its NOT NULL failure rolls the whole batch back.
  const abortUnlessClaimed = db
    .prepare(
      `INSERT INTO object_versions (source, object_type, object_id, version, receipt_id, updated_at)
       SELECT ?1, ?2, ?3, NULL, ?5, ?6
       WHERE NOT EXISTS (SELECT 1 FROM object_versions
         WHERE source = ?1 AND object_type = ?2 AND object_id = ?3 AND version = ?4 AND receipt_id = ?5)`,
    )
    .bind(event.source, object.objectType, object.objectId, version, event.receiptId, now);
  return [claim, abortUnlessClaimed];
}
