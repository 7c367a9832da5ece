import { enqueueReceipts } from "../relay/enqueue";

/** A body is retained in the row, or in R2 with the row saying so (src/bodies/stored-bodies.ts). */
const BODY_RETAINED = "(body IS NOT NULL OR body_location IS NOT NULL)";

/**
 * Replay: put finished receipts back through the normal path — reset to pending (replay_count and replayed_at
 * say so; provenance, where the event came from, never changes), then onto the work queue like any relayed
 * receipt. Safe by construction: processing is idempotent, so a replay of an event whose outcome already
 * committed applies nothing (its committed_at guard holds) and the receipt returns to the status it had. Dead
 * receipts get a fresh retry budget; the lease generation carries on, so no earlier consumer can match it.
 *
 * A replayed receipt is due at once (next_attempt_at = the replay's time, which also puts it in the retry index).
 * If the enqueue fails after the reset, the receipts are pending in D1 with no message: the cron re-drive
 * finds them, so nothing is lost either way.
 */

/** Statuses a replay can start from. Pending and processing receipts are already on their way. */
const REPLAYABLE = ["processed", "stale", "skipped", "dead"] as const;

export type ReplayOne =
  | { kind: "replayed"; receiptId: string; previousStatus: string }
  | { kind: "not_found"; receiptId: string }
  /** Pending or processing: it is already in flight, and a second message would only race it. */
  | { kind: "in_flight"; receiptId: string; status: string }
  /** Payload retention dropped the body: there is nothing left to process. */
  | { kind: "payload_expired"; receiptId: string };

/** Replays one receipt, whatever its finished status. */
export async function replayReceipt(env: Env, receiptId: string, now = Date.now()): Promise<ReplayOne> {
  const current = await env.DB.prepare(`SELECT status, NOT ${BODY_RETAINED} AS bodyMissing FROM receipts WHERE id = ?`)
    .bind(receiptId)
    .first<{ status: string; bodyMissing: number }>();
  if (!current) return { kind: "not_found", receiptId };
  if (!(REPLAYABLE as readonly string[]).includes(current.status)) return { kind: "in_flight", receiptId, status: current.status };
  if (current.bodyMissing) return { kind: "payload_expired", receiptId };

  const reset = await env.DB.prepare(`${RESET_SQL} WHERE id = ? AND status = ? AND ${BODY_RETAINED} RETURNING id, source`)
    .bind(now, receiptId, current.status)
    .first<{ id: string; source: string }>();
  // Changed between the read and the reset (another replay, a consumer): report what it is now.
  if (!reset) return replayStateNow(env, receiptId);
  await enqueueReceipts(env, [{ source: reset.source, receiptId }]);
  return { kind: "replayed", receiptId, previousStatus: current.status };
}

async function replayStateNow(env: Env, receiptId: string): Promise<ReplayOne> {
  const row = await env.DB.prepare("SELECT status FROM receipts WHERE id = ?").bind(receiptId).first<{ status: string }>();
  if (!row) return { kind: "not_found", receiptId };
  return { kind: "in_flight", receiptId, status: row.status };
}

export interface DeadReceiptFilter {
  source?: string;
  eventType?: string;
  /** received_at ≥ this (epoch ms). */
  receivedFrom?: number;
  /** received_at < this (epoch ms). */
  receivedBefore?: number;
  /** At most this many per call (1–1000, default 500); call again while `more` is true. */
  limit?: number;
}

export interface ReplayMany {
  replayed: number;
  receiptIds: string[];
  /** More dead receipts matched than `limit`: call again to continue. */
  more: boolean;
}

/** A filter that cannot be right. The message is written for the API caller. */
export class ReplayFilterError extends Error {
  override name = "ReplayFilterError";
}

export const DEFAULT_REPLAY_LIMIT = 500;
export const MAX_REPLAY_LIMIT = 1000;

/** Replays every dead receipt matching `filter` (all of them when empty), oldest first, up to `limit`. */
export async function replayDeadReceipts(env: Env, filter: DeadReceiptFilter = {}, now = Date.now()): Promise<ReplayMany> {
  const limit = checkFilter(filter);
  const conditions = ["status = 'dead'", BODY_RETAINED];
  const values: (string | number)[] = [];
  const match = (condition: string, value: string | number | undefined) => {
    if (value === undefined) return;
    conditions.push(condition);
    values.push(value);
  };
  match("source = ?", filter.source);
  match("event_type = ?", filter.eventType);
  match("received_at >= ?", filter.receivedFrom);
  match("received_at < ?", filter.receivedBefore);
  const where = conditions.join(" AND ");
  const { results } = await env.DB.prepare(
    `${RESET_SQL} WHERE id IN (SELECT id FROM receipts WHERE ${where} ORDER BY id LIMIT ?) RETURNING id, source`,
  )
    .bind(now, ...values, limit)
    .all<{ id: string; source: string }>();
  const receiptIds = results.map((row) => row.id).sort();
  await enqueueReceipts(env, results.map((row) => ({ source: row.source, receiptId: row.id })));
  const remaining = await env.DB.prepare(`SELECT 1 AS found FROM receipts WHERE ${where} LIMIT 1`)
    .bind(...values)
    .first<{ found: number }>();
  return { replayed: receiptIds.length, receiptIds, more: remaining !== null };
}

/**
 * Back to the start of the pipeline. `attempts` restarts (the run's retry budget), while lease_generation and the
 * attempts table carry on; last_error and stale_against_version stay as history until the next attempt decides
 * otherwise.
 */
const RESET_SQL = `UPDATE receipts SET status = 'pending', replay_count = replay_count + 1, replayed_at = ?1, attempts = 0,
  next_attempt_at = ?1, lease_until = NULL`;

function checkFilter(filter: DeadReceiptFilter): number {
  const limit = filter.limit ?? DEFAULT_REPLAY_LIMIT;
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_REPLAY_LIMIT) {
    throw new ReplayFilterError(`limit must be an integer from 1 to ${MAX_REPLAY_LIMIT}`);
  }
  for (const [name, value] of [["source", filter.source], ["eventType", filter.eventType]] as const) {
    if (value !== undefined && (typeof value !== "string" || value.length === 0 || value.length > 256)) {
      throw new ReplayFilterError(`${name} must be a non-empty string`);
    }
  }
  for (const [name, value] of [["receivedFrom", filter.receivedFrom], ["receivedBefore", filter.receivedBefore]] as const) {
    if (value !== undefined && (!Number.isSafeInteger(value) || value < 0)) {
      throw new ReplayFilterError(`${name} must be a time in epoch milliseconds`);
    }
  }
  if (filter.receivedFrom !== undefined && filter.receivedBefore !== undefined && filter.receivedFrom >= filter.receivedBefore) {
    throw new ReplayFilterError("receivedFrom must be earlier than receivedBefore");
  }
  return limit;
}
