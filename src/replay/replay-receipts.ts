import { and, asc, eq, gt, gte, inArray, isNotNull, isNull, lt, lte, or, type SQL, sql } from "drizzle-orm";
import { batchByName } from "../db/batch";
import { type Database, database } from "../db/client";
import { receipts, replays } from "../db/schema";
import { enqueueReceipts } from "../relay/enqueue";
import { keepOwnAttempt } from "./kept-attempt";
import { bodyStillKept } from "./replay-body";

/** A body is retained in the row, or in R2 with the row saying so (src/bodies/stored-bodies.ts). */
export const BODY_RETAINED = or(isNotNull(receipts.body), isNotNull(receipts.bodyLocation))!;

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
 *
 * Each replay also leaves a row in `replays` (when, from which status, through which door), written in the same
 * batch as the reset and under the same condition, so the log and the receipt never disagree. Only a replay
 * writes there: the happy path pays nothing for the history.
 */

/** Which door a replay came through, kept in its `replays` row. */
export type ReplayRequester = "api" | "dashboard";

/** Statuses a replay can start from. Pending and processing receipts are already on their way. */
const REPLAYABLE = ["processed", "stale", "skipped", "dead"] as const;

export type ReplayOne =
  | { kind: "replayed"; receiptId: string; previousStatus: string }
  | { kind: "not_found"; receiptId: string }
  /** Pending or processing: it is already in flight, and a second message would only race it. */
  | { kind: "in_flight"; receiptId: string; status: string }
  /** Payload retention dropped the body: there is nothing left to process. */
  | { kind: "payload_expired"; receiptId: string }
  /** Dismissed by an operator: restored (POST /admin/api/dead/restore) it is a dead letter again, and replayable. */
  | { kind: "dismissed"; receiptId: string };

/** Replays one receipt, whatever its finished status. */
export async function replayReceipt(
  env: Env,
  receiptId: string,
  now = Date.now(),
  requestedBy: ReplayRequester | null = null,
): Promise<ReplayOne> {
  const db = database(env);
  const [current] = await db
    .select({
      status: receipts.status,
      source: receipts.source,
      bodyRetained: sql<number>`${BODY_RETAINED}`,
      bodyLocation: receipts.bodyLocation,
    })
    .from(receipts)
    .where(eq(receipts.receiptId, receiptId));
  if (!current) return { kind: "not_found", receiptId };
  if (current.status === "dismissed") return { kind: "dismissed", receiptId };
  if (!(REPLAYABLE as readonly string[]).includes(current.status))
    return { kind: "in_flight", receiptId, status: current.status };
  if (!bodyStillKept(env, current, now)) return { kind: "payload_expired", receiptId };

  const unchanged = and(eq(receipts.receiptId, receiptId), eq(receipts.status, current.status), BODY_RETAINED);
  const {
    reset: [reset],
  } = await batchByName(db, {
    logged: logReplays(db, unchanged, now, requestedBy),
    kept: keepOwnAttempt(db, unchanged),
    reset: db.update(receipts).set(resetColumns(now)).where(unchanged).returning({ source: receipts.source }),
  });
  // Changed between the read and the reset (another replay, a consumer): report what it is now.
  if (!reset) return replayStateNow(db, receiptId);
  await enqueueReceipts(env, [{ source: reset.source, receiptId }]);
  return { kind: "replayed", receiptId, previousStatus: current.status };
}

async function replayStateNow(db: Database, receiptId: string): Promise<ReplayOne> {
  const [row] = await db.select({ status: receipts.status }).from(receipts).where(eq(receipts.receiptId, receiptId));
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
  /**
   * Only receipts with ids after this one: the `cursor` the previous call returned. A bulk replay walks the
   * matching dead letters once, oldest first, so those that fail again and are dead once more are not replayed
   * again by the next call, and newer ones are reached.
   */
  after?: string;
  /** Only receipts with ids up to and including this one (a replay across databases shares one boundary). */
  through?: string;
  /**
   * Only this route's dead letters (docs/routing.md, "Fan-out"): here, receipts whose own delivery is the route's
   * (`receipts.route` names it), and receipts that never recorded a route (a one-route source's, and one of a source
   * with several that died before its fan-out was written: none of its routes has had a delivery yet, so each of
   * them finds it, and its replay runs the fan-out whole); replay-delivery.ts replays the route's further deliveries.
   */
  route?: { name: string };
}

export interface ReplayMany {
  replayed: number;
  receiptIds: string[];
  /** More dead receipts matched than `limit`: call again, with `after: cursor`, to continue. */
  more: boolean;
  /** The newest receipt id this call reached: pass it as `after` to continue (null when nothing was reached). */
  cursor: string | null;
}

/** A filter that cannot be right. The message is written for the API caller. */
export class ReplayFilterError extends Error {
  override name = "ReplayFilterError";
}

export const DEFAULT_REPLAY_LIMIT = 500;
/** A receipt id (a ULID): what `after` and `through` must be. */
const RECEIPT_ID = /^[0-9A-HJKMNP-TV-Z]{26}$/;
export const MAX_REPLAY_LIMIT = 1000;

/** Replays every dead receipt matching `filter` (all of them when empty), oldest first, up to `limit`. */
export async function replayDeadReceipts(
  env: Env,
  filter: DeadReceiptFilter = {},
  now = Date.now(),
  requestedBy: ReplayRequester | null = null,
): Promise<ReplayMany> {
  const limit = checkFilter(filter);
  const db = database(env);
  const matching = deadMatching(filter);
  // The log and the reset select the same oldest `limit` matching receipts: one batch is one transaction.
  const chosen = inArray(
    receipts.receiptId,
    db
      .select({ receiptId: receipts.receiptId })
      .from(receipts)
      .where(matching)
      .orderBy(asc(receipts.receiptId))
      .limit(limit),
  );
  const { reset } = await batchByName(db, {
    logged: logReplays(db, chosen, now, requestedBy),
    kept: keepOwnAttempt(db, chosen),
    reset: db
      .update(receipts)
      .set(resetColumns(now))
      .where(chosen)
      .returning({ receiptId: receipts.receiptId, source: receipts.source }),
  });
  const receiptIds = reset.map((row) => row.receiptId).sort();
  await enqueueReceipts(env, reset);
  const cursor = receiptIds.at(-1) ?? filter.through ?? filter.after ?? null;
  return {
    replayed: receiptIds.length,
    receiptIds,
    more: await anyDeadMatching(env, { ...filter, through: undefined, after: cursor ?? undefined }),
    cursor,
  };
}

/** The ids of the oldest `limit` dead receipts matching `filter`: where a replay across databases draws its boundary. */
export async function oldestDeadMatching(env: Env, filter: DeadReceiptFilter): Promise<string[]> {
  const limit = checkFilter(filter);
  const rows = await database(env)
    .select({ receiptId: receipts.receiptId })
    .from(receipts)
    .where(deadMatching(filter))
    .orderBy(asc(receipts.receiptId))
    .limit(limit);
  return rows.map((row) => row.receiptId);
}

/** Whether any dead receipt matches `filter`: a bulk replay spanning several databases asks the ones it did not reach. */
export async function anyDeadMatching(env: Env, filter: DeadReceiptFilter): Promise<boolean> {
  checkFilter(filter);
  const [found] = await database(env)
    .select({ found: sql<number>`1` })
    .from(receipts)
    .where(deadMatching(filter))
    .limit(1);
  return found !== undefined;
}

/** A receipt with no route recorded: a one-route source's, or one whose fan-out was never written (fan-out.ts). */
const NOT_FANNED_OUT = and(isNull(receipts.route), isNull(receipts.filteredRoutes));

function deadMatching(filter: DeadReceiptFilter): SQL | undefined {
  const { route } = filter;
  return and(
    eq(receipts.status, "dead"),
    eventMatching(filter),
    route === undefined ? undefined : or(eq(receipts.route, route.name), NOT_FANNED_OUT),
    filter.after === undefined ? undefined : gt(receipts.receiptId, filter.after),
    filter.through === undefined ? undefined : lte(receipts.receiptId, filter.through),
  );
}

/** The filter's conditions on the event itself (its receipt row), whatever its status: its body still kept. */
export function eventMatching(filter: DeadReceiptFilter): SQL | undefined {
  return and(
    BODY_RETAINED,
    filter.source === undefined ? undefined : eq(receipts.source, filter.source),
    filter.eventType === undefined ? undefined : eq(receipts.eventType, filter.eventType),
    filter.receivedFrom === undefined ? undefined : gte(receipts.receivedAt, filter.receivedFrom),
    filter.receivedBefore === undefined ? undefined : lt(receipts.receivedAt, filter.receivedBefore),
  );
}

/**
 * Back to the start of the pipeline. `attempts` restarts (the run's retry budget), while lease_generation and the
 * attempts table carry on; last_error and stale_against_version stay as history until the next attempt decides
 * otherwise.
 */
export function resetColumns(now: number) {
  return {
    status: "pending" as const,
    replayCount: sql`${receipts.replayCount} + 1`,
    replayedAt: now,
    attempts: 0,
    nextAttemptAt: now,
    leaseUntil: null,
  };
}

/**
 * One `replays` row per receipt the reset that follows it in the batch will take: the same condition, read before
 * the reset, so previous_status is the status replayed from and replay_number the replay_count it is about to get.
 */
export function logReplays(db: Database, resetting: SQL | undefined, now: number, requestedBy: ReplayRequester | null) {
  return db.insert(replays).select(
    db
      .select({
        receiptId: receipts.receiptId,
        replayNumber: sql<number>`${receipts.replayCount} + 1`.as("replay_number"),
        replayedAt: sql<number>`${now}`.as("replayed_at"),
        previousStatus: receipts.status,
        requestedBy: sql<string | null>`${requestedBy}`.as("requested_by"),
        previousProcessedAt: receipts.processedAt,
      })
      .from(receipts)
      .where(resetting),
  );
}

/** Checks a filter the API caller wrote (ReplayFilterError says what is wrong); returns its limit. */
export function checkFilter(filter: DeadReceiptFilter): number {
  const limit = filter.limit ?? DEFAULT_REPLAY_LIMIT;
  if (!Number.isSafeInteger(limit) || limit < 1 || limit > MAX_REPLAY_LIMIT) {
    throw new ReplayFilterError(`limit must be an integer from 1 to ${MAX_REPLAY_LIMIT}`);
  }
  for (const [name, value] of [
    ["source", filter.source],
    ["eventType", filter.eventType],
    ["route", filter.route?.name],
  ] as const) {
    if (value !== undefined && (typeof value !== "string" || value.length === 0 || value.length > 256)) {
      throw new ReplayFilterError(`${name} must be a non-empty string`);
    }
  }
  for (const [name, value] of [
    ["receivedFrom", filter.receivedFrom],
    ["receivedBefore", filter.receivedBefore],
  ] as const) {
    if (value !== undefined && (!Number.isSafeInteger(value) || value < 0)) {
      throw new ReplayFilterError(`${name} must be a time in epoch milliseconds`);
    }
  }
  for (const [name, value] of [
    ["after", filter.after],
    ["through", filter.through],
  ] as const) {
    if (value !== undefined && (typeof value !== "string" || !RECEIPT_ID.test(value)))
      throw new ReplayFilterError(`${name} must be a receipt id`);
  }
  if (
    filter.receivedFrom !== undefined &&
    filter.receivedBefore !== undefined &&
    filter.receivedFrom >= filter.receivedBefore
  ) {
    throw new ReplayFilterError("receivedFrom must be earlier than receivedBefore");
  }
  return limit;
}
