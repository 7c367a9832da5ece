import type { HandlerContext, HandlerEvent, HandlerPlan } from "./types";

/**
 * Ordering by version, never by arrival (DESIGN invariant 5). A handler whose events carry a per-object version
 * — or only a timestamp — wraps its effect in `planInVersionOrder`, which applies it only when the event is
 * newer than what object_versions holds for that object.
 *
 * The read answers the common case cheaply (an older event is stale, nothing to run); the plan's version gate
 * (see VersionGate) re-checks atomically inside the consumer's batch and aborts it — effects included — when
 * another event for the same object got there first. The consumer then records the receipt as stale against the
 * version that won.
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
      return {
        outcome: "stale",
        againstVersion: stored,
        note: "order unknown: same timestamp as the stored state; not applied",
      };
    }
    return { outcome: "stale", againstVersion: stored };
  }
  return {
    outcome: "apply",
    statements: effects,
    versionGate: {
      claim: context.db
        .prepare(
          `INSERT INTO object_versions (source, object_type, object_id, version, receipt_id, updated_at)
           VALUES (?1, ?2, ?3, ?4, ?5, ?6)
           ON CONFLICT (source, object_type, object_id) DO UPDATE
             SET version = excluded.version, receipt_id = excluded.receipt_id, updated_at = excluded.updated_at
             WHERE object_versions.version < excluded.version`,
        )
        .bind(event.source, object.objectType, object.objectId, incoming, event.receiptId, context.now),
      readStored: context.db
        .prepare("SELECT version FROM object_versions WHERE source = ? AND object_type = ? AND object_id = ?")
        .bind(event.source, object.objectType, object.objectId),
      version: incoming,
      orderedBy: "version" in orderedBy ? "version" : "timestamp",
    },
  };
}
