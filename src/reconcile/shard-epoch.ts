import { HANDOVER_START, type HandoverCursor, type KnownKey } from "../claims/epoch";
import { type PreviousLayout, previousLayoutOf, shardEpoch } from "../claims/epoch-config";
import { shardAt, shardCount, shardIndex, shardsOf } from "../claims/routing";
import { readCheckpoint, writeCheckpoint } from "../db/checkpoints";
import { logError } from "../lib/log";
import type { SourceConfig } from "../sources/config";

/**
 * The cron's side of a shard epoch (src/claims/epoch-config.ts): it copies every key each previous owner holds to
 * the key's new owner, a bounded page at a time, then tells every new shard the epoch is closed, after which their
 * claims stop consulting. Progress is kept in the default database's `checkpoints` (`source = '*'`,
 * `reconciler = 'shard-epoch'`); the claim path never reads it. A page copied twice (a run that failed before its
 * write) is harmless: a new owner keeps the copy it holds.
 */
export const SHARD_EPOCH_CHECKPOINT = "shard-epoch";
/** Keys per page read from a previous owner (a few hundred bytes each over RPC). */
export const HANDOVER_PAGE = 1000;
/** Durable Object calls the handover may make in one run (a page read, and one adopt per new owner it names). */
export const HANDOVER_CALLS_PER_RUN = 256;
/**
 * The handover starts this long after a run first sees the epoch: while a deploy reaches every isolate, an isolate
 * still on the old config may claim a key in its previous owner, behind a cursor that had passed it.
 */
export const ROLLOUT_GRACE_MS = 10 * 60_000;

/** Per source: the epoch handed over, when a run first saw it, each previous shard's cursor (null: done). */
export interface EpochProgress {
  epoch: string;
  seenAt: number;
  cursors: Record<string, HandoverCursor | null>;
  closed: boolean;
}
export type EpochRecord = Record<string, EpochProgress>;

export interface HandoverCounts {
  epochKeysHandedOver: number;
  /** Previous shards of open epochs not yet fully handed over. */
  epochShardsPending: number;
  epochsClosed: number;
}

export const NO_HANDOVER: HandoverCounts = { epochKeysHandedOver: 0, epochShardsPending: 0, epochsClosed: 0 };

/** The run's share of the handover for every source whose layout the declared epoch changed. */
export async function handOverEpochs(env: Env, sources: readonly SourceConfig[], now: number): Promise<HandoverCounts> {
  const { epoch } = shardEpoch(env);
  if (!epoch) return { ...NO_HANDOVER };
  let known: EpochRecord;
  try {
    known = (await readCheckpoint<EpochRecord>(env, "*", SHARD_EPOCH_CHECKPOINT)) ?? {};
  } catch (error) {
    logError("reconcile.shard_epoch_unreadable", error, {});
    return { ...NO_HANDOVER };
  }
  const counts = { ...NO_HANDOVER };
  const record: EpochRecord = {};
  const budget = { calls: HANDOVER_CALLS_PER_RUN };
  const currentShards = shardCount(env);
  for (const source of [...sources].sort((a, b) => a.name.localeCompare(b.name))) {
    const layout = previousLayoutOf(epoch, source, currentShards);
    if (!layout) continue;
    const previous = known[source.name];
    const progress: EpochProgress =
      previous?.epoch === layout.epoch ? previous : { epoch: layout.epoch, seenAt: now, cursors: {}, closed: false };
    record[source.name] = progress;
    if (progress.closed || now < progress.seenAt + ROLLOUT_GRACE_MS) {
      if (!progress.closed) counts.epochShardsPending += layout.shards;
      continue;
    }
    counts.epochKeysHandedOver += await handOverSource(env, source, layout, progress, budget);
    const pending = Array.from({ length: layout.shards }, (_, index) => index).filter(
      (index) => progress.cursors[index] !== null,
    );
    counts.epochShardsPending += pending.length;
    if (pending.length === 0) {
      try {
        await Promise.all(shardsOf(env, source).map((stub) => stub.closeEpoch(layout.epoch)));
        progress.closed = true;
        counts.epochsClosed++;
      } catch (error) {
        // A shard not told keeps consulting (one request per new key), and the next run tells it again.
        logError("reconcile.shard_epoch_unclosed", error, { source: source.name });
      }
    }
  }
  try {
    await writeCheckpoint(env, "*", SHARD_EPOCH_CHECKPOINT, record, now);
  } catch (error) {
    // The next run repeats the pages since the last write: copies are idempotent.
    logError("reconcile.shard_epoch_unwritten", error, {});
  }
  return counts;
}

/** Pages through each previous shard of one source while the run's budget lasts; returns the keys newly adopted. */
async function handOverSource(
  env: Env,
  source: SourceConfig,
  layout: PreviousLayout,
  progress: EpochProgress,
  budget: { calls: number },
): Promise<number> {
  const newOwners = shardsOf(env, source);
  let adopted = 0;
  for (let index = 0; index < layout.shards; index++) {
    let cursor: HandoverCursor | null = index in progress.cursors ? (progress.cursors[index] ?? null) : HANDOVER_START;
    const previousOwner = shardAt(env, source.name, layout.jurisdiction, index);
    try {
      while (cursor !== null && budget.calls > 0) {
        budget.calls--;
        const page = await previousOwner.handoverPage(source.name, cursor, HANDOVER_PAGE);
        const byOwner = new Map<number, KnownKey[]>();
        for (const key of page.keys) {
          const owner = shardIndex(key.claimKey, newOwners.length);
          // A key that stays where it is needs no copy.
          if (owner === index && layout.jurisdiction === source.placement.jurisdiction) continue;
          const keys = byOwner.get(owner) ?? [];
          keys.push(key);
          byOwner.set(owner, keys);
        }
        budget.calls -= byOwner.size;
        const results = await Promise.all(
          [...byOwner].map(([owner, keys]) => newOwners[owner]!.adoptKeys(source.name, keys)),
        );
        adopted += results.reduce((sum, count) => sum + count, 0);
        cursor = page.next;
        progress.cursors[index] = cursor;
      }
    } catch (error) {
      // This shard's handover resumes from its last page next run; the others go on.
      logError("reconcile.shard_epoch_handover_failed", error, { source: source.name, shard: index });
    }
    if (budget.calls <= 0) break;
  }
  return adopted;
}
