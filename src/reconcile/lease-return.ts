import { and, eq, isNotNull, lt, lte, sql } from "drizzle-orm";
import { decideAbandoned } from "../consumers/decide/decide";
import { abandonedAttemptRows } from "../consumers/lease/lease";
import { database } from "../db/client";
import { inJsonList, inJsonPairs } from "../db/id-list";
import { receipts } from "../db/schema";
import { logEvent } from "../lib/log";
import { enqueueReceipts } from "../relay/enqueue";
import { PROCESSING_LEASE_MS as LEASE_MS, retryPolicyOf } from "../sources/config";
import { loadSources } from "../sources/registry";

/** Leases returned per run; the rest wait for the next run. */
const LEASES_PER_RUN = 200;

/**
 * The due time a re-driven receipt gets: the run's clock, but never ahead of the wall clock the consumers judge
 * readiness by (a run's clock is injectable, and a clock ahead would park the receipt instead of waking it).
 * Setting it also puts the receipt in the retry index, so a later run finds it again if it is still not done.
 */
export function redriveDueAt(now: number): number {
  return Math.min(now, Date.now());
}

/**
 * Leased retries whose consumer died mid-attempt (only leased attempts — forwards and external calls, and every
 * run of a redelivered or re-driven message — hold `processing`, and a retry sits in the receipts_retrying index).
 * A first attempt abandoned the same way is found by the stuck scan, which hands it to `settleAbandonedLeases`.
 */
export async function returnExpiredLeases(env: Env, now: number): Promise<number> {
  const abandoned = await database(env)
    .select({ receiptId: receipts.receiptId })
    .from(receipts)
    .where(
      and(
        isNotNull(receipts.nextAttemptAt),
        lte(receipts.nextAttemptAt, now),
        eq(receipts.status, "processing"),
        lt(receipts.leaseUntil, now),
      ),
    )
    .limit(LEASES_PER_RUN);
  return settleAbandonedLeases(
    env,
    abandoned.map((row) => row.receiptId),
    now,
  );
}

/**
 * Receipts still `processing` under a lease that ran out: their attempt never finished. Each is decided as the
 * consumer would decide it (decideAbandoned): its attempt recorded as `unknown` (it may or may not have reached its
 * destination), and then either back to pending with a fresh message, or — once that attempt spent the retry budget
 * or max_age — dead, so a poison event the cron finds is not given one more run. A source that is not configured
 * (or whose table is broken) is only handed back: the consumer decides it once its table is readable. Everything is
 * fenced by the generation read, in one D1 batch: a consumer that took the receipt over or finished in between keeps
 * its own outcome, and one that finishes later replaces the presumed `unknown` with its real outcome (commit.ts).
 * Returns how many were handed back or dead-lettered.
 */
export async function settleAbandonedLeases(env: Env, receiptIds: readonly string[], now: number): Promise<number> {
  if (receiptIds.length === 0) return 0;
  const db = database(env);
  const rows = await db
    .select({
      receiptId: receipts.receiptId,
      source: receipts.source,
      route: receipts.route,
      attempts: receipts.attempts,
      receivedAt: receipts.receivedAt,
      replayedAt: receipts.replayedAt,
      leaseGeneration: receipts.leaseGeneration,
    })
    .from(receipts)
    .where(
      and(inJsonList(receipts.receiptId, receiptIds), eq(receipts.status, "processing"), lt(receipts.leaseUntil, now)),
    );
  if (rows.length === 0) return 0;
  const sources = loadSources(env);
  const verdicts = rows.map((row) => {
    const policy = retryPolicyOf(sources.get(row.source), row.route);
    const { decision } = decideAbandoned(row, policy, now);
    const dead = policy !== undefined && decision.kind === "fail" && decision.receiptStatus === "dead";
    return { row, lastError: dead ? decision.lastError : null };
  });
  const stillExpired = (picked: typeof verdicts) =>
    and(
      inJsonPairs(
        receipts.receiptId,
        receipts.leaseGeneration,
        picked.map(({ row }) => [row.receiptId, row.leaseGeneration] as const),
      ),
      eq(receipts.status, "processing"),
      lt(receipts.leaseUntil, now),
    );
  const spent = verdicts.filter((verdict) => verdict.lastError !== null);
  const handedBack = verdicts.filter((verdict) => verdict.lastError === null);
  const [, returned, ...deadened] = await db.batch([
    abandonedAttemptRows(
      db,
      stillExpired(verdicts),
      sql<number>`${receipts.leaseGeneration}`,
      sql<number>`${receipts.leaseUntil} - ${LEASE_MS}`,
      now,
    ),
    db
      .update(receipts)
      .set({ status: "pending", leaseUntil: null, nextAttemptAt: redriveDueAt(now) })
      .where(handedBack.length > 0 ? stillExpired(handedBack) : sql`0`)
      .returning({ receiptId: receipts.receiptId, source: receipts.source }),
    ...spent.map(({ row, lastError }) =>
      db
        .update(receipts)
        .set({ status: "dead", leaseUntil: null, nextAttemptAt: null, lastError })
        .where(stillExpired([{ row, lastError }]))
        .returning({ receiptId: receipts.receiptId }),
    ),
  ]);
  await enqueueReceipts(env, returned, 0, { redriven: true });
  const dead = deadened.flat();
  if (dead.length > 0) logEvent("redrive.abandoned_dead", { receipts: dead.length, first: dead[0]!.receiptId });
  return returned.length + dead.length;
}
