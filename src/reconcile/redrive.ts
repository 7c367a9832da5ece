import { and, asc, eq, isNotNull, isNull, lte, or } from "drizzle-orm";
import { shardsOf } from "../claims/routing";
import type { SweepReport } from "../claims/shard";
import type { RetiredShard } from "../claims/shard-layouts";
import { readCheckpoint, writeCheckpoint } from "../db/checkpoints";
import { database } from "../db/client";
import { inJsonList } from "../db/id-list";
import { receipts } from "../db/schema";
import { logError } from "../lib/log";
import { secretValue } from "../lib/secrets";
import { enqueueReceipts } from "../relay/enqueue";
import type { SourceConfig } from "../sources/config";
import { redriveDueAt, settleAbandonedLeases } from "./lease-return";
import { type HandoverCounts, handOverEpochs, NO_HANDOVER } from "./shard-epoch";
import { readShardKeeps, shardPrune } from "./shard-keep";
import { currentLayouts, forgetDrained, rememberShardLayouts, retiredVisits } from "./shard-layouts";
import { STUCK_SCAN_CURSOR, scanForStuck } from "./stuck-scan";

/**
 * Re-drive: finish work that stalled at a boundary nobody will revisit on their own.
 *   - a claim shard holding accepted claims whose relay alarm keeps failing or was lost (the same visit prunes
 *     the shard's keys past dedupe retention);
 *   - a pending receipt whose queue message never arrived (or was dropped after a retry), however late it reached D1;
 *   - a receipt leased by a consumer that died before finishing (lease-return.ts).
 * Every change is claimed with one conditional UPDATE … RETURNING, so two overlapping runs never both re-enqueue
 * the same receipt, and a re-enqueue that does slip through is harmless: the lease and the committed_at guard
 * stop a second effect.
 */

/** A receipt not picked up this long after it should have been is treated as lost by the queue. */
export const OVERDUE_GRACE_MS = 10 * 60_000;
/** Overdue retries re-enqueued per run; the rest wait for the next run. */
export const REDRIVE_BATCH = 200;
/** Relay batches per shard per visit (each batch is at most the shard's relay batch size). */
const SHARD_RELAY_ROUNDS = 4;
/**
 * Shard visits per run. Below it every shard of every source is visited on every run; above it the visits rotate
 * (a cursor in `checkpoints`), so each shard is still reached every ceil(shards / budget) runs and a run's
 * Durable Object subrequests never exceed the budget. RECONCILE_SHARD_VISITS overrides it.
 */
export const DEFAULT_SHARD_VISITS = 256;
const SWEEP_CURSOR_SOURCE = "*";

export interface ShardSweepCounts extends HandoverCounts {
  shardsVisited: number;
  shardsTotal: number;
  claimsRelayed: number;
  claimsStillUnrelayed: number;
  shardKeysExpired: number;
  /** Shards the config no longer names that still hold something, as the run found the record (shard-layouts.ts). */
  retiredShards: number;
  /** Of those, found holding nothing by this run's visits: no run visits them again. */
  retiredShardsDrained: number;
}

export function shardVisitBudget(env: Env): number {
  const configured = Number(secretValue(env, "RECONCILE_SHARD_VISITS"));
  return Number.isInteger(configured) && configured > 0 ? configured : DEFAULT_SHARD_VISITS;
}

type ShardVisit = { retired: RetiredShard | null; visit: () => Promise<SweepReport & { holdsNothing?: boolean }> };

/**
 * Visits claim shards: each relays what it still holds and prunes keys past its source's dedupe retention. A
 * shard that fails (D1 unreachable from it) is counted, not fatal: its work stays in the shard for the next visit.
 * Shards the config no longer names (a lower CLAIM_SHARD_COUNT, another jurisdiction, a source removed) are
 * visited too, in the same budget, until they hold nothing (shard-layouts.ts), when `visitRetired` says `sources` is
 * the whole config: the cron's run, once the config was read. Against part of it every other shard would look retired.
 * The same run hands a declared shard epoch's keys to their new owners (shard-epoch.ts).
 */
export async function sweepShards(
  env: Env,
  sources: readonly SourceConfig[],
  now: number,
  options: { visitRetired: boolean } = { visitRetired: false },
): Promise<ShardSweepCounts & { shardsFailed: number }> {
  const keeps = await readShardKeeps(env);
  const visits: ShardVisit[] = sources.flatMap((source) => {
    const stubs = shardsOf(env, source.name);
    return stubs.map((stub, shard) => {
      const { keyCutoff, keepKeys } = shardPrune(keeps.get(source.name), source, now, shard, stubs.length);
      return { retired: null, visit: () => stub.sweep(keyCutoff, SHARD_RELAY_ROUNDS, keepKeys) };
    });
  });
  const current = currentLayouts(env, sources);
  const known = options.visitRetired ? await rememberShardLayouts(env, current, now) : null;
  const retired = known ? retiredVisits(env, known, current, sources, now, SHARD_RELAY_ROUNDS) : [];
  visits.push(...retired.map(({ shard, visit }) => ({ retired: shard, visit })));
  const budget = shardVisitBudget(env);
  let chosen = visits;
  if (visits.length > budget) {
    const offset =
      ((await readCheckpoint<{ offset: number }>(env, SWEEP_CURSOR_SOURCE, "shard-sweep"))?.offset ?? 0) %
      visits.length;
    chosen = Array.from({ length: budget }, (_, step) => visits[(offset + step) % visits.length]!);
    await writeCheckpoint(env, SWEEP_CURSOR_SOURCE, "shard-sweep", { offset: (offset + budget) % visits.length }, now);
  }
  const results = await Promise.allSettled(chosen.map(({ visit }) => visit()));
  const counts = {
    shardsVisited: chosen.length,
    shardsTotal: visits.length,
    claimsRelayed: 0,
    claimsStillUnrelayed: 0,
    shardKeysExpired: 0,
    retiredShards: retired.length,
    retiredShardsDrained: 0,
    shardsFailed: 0,
    ...NO_HANDOVER,
  };
  const emptied: RetiredShard[] = [];
  results.forEach((result, index) => {
    if (result.status === "rejected") {
      counts.shardsFailed++;
      return;
    }
    counts.claimsRelayed += result.value.relayed;
    counts.claimsStillUnrelayed += result.value.remaining;
    counts.shardKeysExpired += result.value.keysPruned;
    const retiredShard = chosen[index]!.retired;
    if (retiredShard && result.value.holdsNothing) emptied.push(retiredShard);
  });
  counts.retiredShardsDrained = emptied.length;
  await forgetDrained(env, emptied, now);
  // A shard epoch's handover (shard-epoch.ts), against the whole config only, as the retired shards' visits.
  if (options.visitRetired) Object.assign(counts, await handOverEpochs(env, sources, now));
  if (counts.shardsFailed > 0) {
    const firstFailure = results.find((result): result is PromiseRejectedResult => result.status === "rejected");
    logError("reconcile.shard_sweep_failed", firstFailure?.reason, { failed: counts.shardsFailed });
  }
  return counts;
}

/** Receipts claimed by one UPDATE (and sent by one enqueue): a bounded JSON list per statement. */
const CLAIM_CHUNK = 500;

/**
 * Receipts nobody will come back to on their own:
 *   - retries overdue by the grace period, through the partial index receipts_retrying (only receipts that failed,
 *     were re-driven, replayed or are waiting for a broken source's fix have a due time);
 *   - receipts never attempted, or whose first attempt's lease ran out, whose queue message was lost: found by the
 *     stuck scan (stuck-scan.ts) in the order they reached D1, once they have been there the grace period.
 * Each one found is claimed by setting next_attempt_at to now (so the next run waits another grace period) and
 * re-enqueued; a re-enqueue that races a live consumer is harmless (commit guard, lease). The scan's cursor moves
 * only once what it found is claimed: a run that fails in between is repeated by the next one. `horizon` (run
 * clock) holds back what was relayed or due after it: the consumer has not reached it yet (queue-probe.ts).
 */
export async function reenqueueOverdue(env: Env, now: number, horizon = Number.POSITIVE_INFINITY): Promise<number> {
  // While the consumer is behind (queue-probe.ts), nothing due after the newest probe it handled counts as lost.
  const cutoff = Math.max(0, Math.min(now - OVERDUE_GRACE_MS, horizon));
  const db = database(env);
  const overdueRetries = await db
    .select({ receiptId: receipts.receiptId, source: receipts.source })
    .from(receipts)
    .where(
      and(
        isNotNull(receipts.nextAttemptAt),
        lte(receipts.nextAttemptAt, cutoff),
        // A leased retry whose consumer died is returnExpiredLeases' to settle (it records the lost attempt).
        eq(receipts.status, "pending"),
      ),
    )
    .orderBy(asc(receipts.nextAttemptAt))
    .limit(REDRIVE_BATCH);
  const scan = await scanForStuck(env, now, cutoff);
  // A first attempt whose lease ran out is settled like any abandoned lease: its attempt recorded, and dead once
  // it spent the budget. The rest were never attempted (or are due retries): claimed and sent.
  const abandoned = scan.stuck.filter((row) => row.status === "processing").map((row) => row.receiptId);
  let claimedCount = await settleAbandonedLeases(env, abandoned, now);
  const found = [
    ...new Set(
      [...overdueRetries, ...scan.stuck.filter((row) => row.status !== "processing")].map((row) => row.receiptId),
    ),
  ];

  for (let start = 0; start < found.length; start += CLAIM_CHUNK) {
    const claimed = await db
      .update(receipts)
      .set({ status: "pending", leaseUntil: null, nextAttemptAt: redriveDueAt(now) })
      .where(
        and(
          inJsonList(receipts.receiptId, found.slice(start, start + CLAIM_CHUNK)),
          eq(receipts.status, "pending"),
          or(isNull(receipts.nextAttemptAt), lte(receipts.nextAttemptAt, cutoff)),
        ),
      )
      .returning({ receiptId: receipts.receiptId, source: receipts.source });
    await enqueueReceipts(env, claimed, 0, { redriven: true });
    claimedCount += claimed.length;
  }
  if (scan.next) await writeCheckpoint(env, "*", STUCK_SCAN_CURSOR, scan.next, now);
  return claimedCount;
}
