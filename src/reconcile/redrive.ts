import { secretValue } from "../lib/secrets";
import { shardsOf } from "../claims/routing";
import { logError } from "../lib/log";
import { enqueueReceipts } from "../relay/relay";
import type { SourceConfig } from "../sources/config";
import { readCheckpoint, writeCheckpoint } from "./checkpoints";

/**
 * Re-drive: finish work that stalled at a boundary nobody will revisit on their own.
 *   - a claim shard holding accepted claims whose relay alarm keeps failing or was lost (the same visit prunes
 *     the shard's keys past dedupe retention);
 *   - a pending receipt whose queue message never arrived (or was dropped after a retry);
 *   - a receipt leased by a consumer that died before finishing.
 * Every change is claimed with one conditional UPDATE … RETURNING, so two overlapping runs never both re-enqueue
 * the same receipt, and a re-enqueue that does slip through is harmless: the lease and the processed-key guard
 * stop a second effect.
 */

/** A receipt not picked up this long after it should have been is treated as lost by the queue. */
export const OVERDUE_GRACE_MS = 10 * 60_000;
/** Receipts re-enqueued per run, per kind; the rest wait for the next run. */
export const REDRIVE_BATCH = 200;
/** Relay batches per shard per visit (each batch is at most the shard's relay batch size). */
const SHARD_RELAY_ROUNDS = 4;
/** Keys each shard forgets per visit. */
const SHARD_PRUNE_LIMIT = 1000;
/**
 * Shard visits per run. Below it every shard of every source is visited on every run; above it the visits rotate
 * (a cursor in `checkpoints`), so each shard is still reached every ceil(shards / budget) runs and a run's
 * Durable Object subrequests never exceed the budget. RECONCILE_SHARD_VISITS overrides it.
 */
export const DEFAULT_SHARD_VISITS = 256;
const SWEEP_CURSOR_SOURCE = "*";

export interface ShardSweepCounts {
  shardsVisited: number;
  shardsTotal: number;
  claimsRelayed: number;
  claimsStillUnrelayed: number;
  shardKeysExpired: number;
}

export function shardVisitBudget(env: Env): number {
  const configured = Number(secretValue(env, "RECONCILE_SHARD_VISITS"));
  return Number.isInteger(configured) && configured > 0 ? configured : DEFAULT_SHARD_VISITS;
}

/**
 * Visits claim shards: each relays what it still holds and prunes keys past its source's dedupe retention. A
 * shard that fails (D1 unreachable from it) is counted, not fatal: its work stays in the shard for the next visit.
 */
export async function sweepShards(env: Env, sources: readonly SourceConfig[], now: number): Promise<ShardSweepCounts & { shardsFailed: number }> {
  const visits = sources.flatMap((source) =>
    shardsOf(env, source.name).map((stub) => ({ stub, keyCutoff: now - source.dedupeRetentionMs })),
  );
  const budget = shardVisitBudget(env);
  let chosen = visits;
  if (visits.length > budget) {
    const offset = ((await readCheckpoint<{ offset: number }>(env, SWEEP_CURSOR_SOURCE, "shard-sweep"))?.offset ?? 0) % visits.length;
    chosen = Array.from({ length: budget }, (_, step) => visits[(offset + step) % visits.length]!);
    await writeCheckpoint(env, SWEEP_CURSOR_SOURCE, "shard-sweep", { offset: (offset + budget) % visits.length }, now);
  }
  const results = await Promise.allSettled(
    chosen.map(({ stub, keyCutoff }) => stub.sweep(keyCutoff, SHARD_RELAY_ROUNDS, SHARD_PRUNE_LIMIT)),
  );
  const counts = { shardsVisited: chosen.length, shardsTotal: visits.length, claimsRelayed: 0, claimsStillUnrelayed: 0, shardKeysExpired: 0, shardsFailed: 0 };
  for (const result of results) {
    if (result.status === "rejected") {
      counts.shardsFailed++;
      continue;
    }
    counts.claimsRelayed += result.value.relayed;
    counts.claimsStillUnrelayed += result.value.remaining;
    counts.shardKeysExpired += result.value.keysPruned;
  }
  if (counts.shardsFailed > 0) {
    const firstFailure = results.find((result): result is PromiseRejectedResult => result.status === "rejected");
    logError("reconcile.shard_sweep_failed", firstFailure?.reason, { failed: counts.shardsFailed });
  }
  return counts;
}

/**
 * Pending receipts whose message is overdue: never enqueued since the relay wrote them, or due for a retry long
 * ago. Marking enqueued_at first (the claim) means the next run waits another grace period before trying again.
 */
export async function reenqueueOverdue(env: Env, now: number): Promise<number> {
  const cutoff = now - OVERDUE_GRACE_MS;
  const claimed = await env.DB.prepare(
    `UPDATE receipts SET enqueued_at = ?1
     WHERE id IN (
       SELECT id FROM receipts
       WHERE status = 'pending' AND COALESCE(next_attempt_at, 0) <= ?2
         AND COALESCE(enqueued_at, relayed_at, received_at) <= ?2
       ORDER BY received_at LIMIT ?3)
       AND status = 'pending' AND COALESCE(enqueued_at, relayed_at, received_at) <= ?2
     RETURNING id AS receiptId`,
  )
    .bind(now, cutoff, REDRIVE_BATCH)
    .all<{ receiptId: string }>();
  const receiptIds = claimed.results.map((row) => row.receiptId);
  await enqueueReceipts(env, receiptIds);
  return receiptIds.length;
}

/**
 * Receipts whose consumer died mid-attempt: back to pending, the dangling attempt closed as "unknown" (it may or
 * may not have reached its destination), and a fresh message enqueued.
 */
export async function returnExpiredLeases(env: Env, now: number): Promise<number> {
  const returned = await env.DB.prepare(
    `UPDATE receipts SET status = 'pending', lease_until = NULL, next_attempt_at = NULL, enqueued_at = ?1
     WHERE id IN (
       SELECT id FROM receipts WHERE status = 'processing' AND lease_until < ?1 ORDER BY lease_until LIMIT ?2)
       AND status = 'processing' AND lease_until < ?1
     RETURNING id AS receiptId`,
  )
    .bind(now, REDRIVE_BATCH)
    .all<{ receiptId: string }>();
  const receiptIds = returned.results.map((row) => row.receiptId);
  if (receiptIds.length === 0) return 0;
  await env.DB.batch(
    receiptIds.map((receiptId) =>
      env.DB.prepare(
        `UPDATE attempts SET finished_at = ?, outcome = 'unknown', error = 'lease expired before the attempt finished'
         WHERE receipt_id = ? AND finished_at IS NULL`,
      ).bind(now, receiptId),
    ),
  );
  await enqueueReceipts(env, receiptIds);
  return receiptIds.length;
}
