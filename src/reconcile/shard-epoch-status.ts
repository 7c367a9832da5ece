import { previousLayoutOf, shardEpoch } from "../claims/epoch-config";
import { shardCount } from "../claims/routing";
import { readCheckpoint } from "../db/checkpoints";
import type { SourceConfig } from "../sources/config";
import { type EpochRecord, SHARD_EPOCH_CHECKPOINT } from "./shard-epoch";

/** What GET /admin/api/health says of a declared shard epoch, and when CLAIM_SHARD_PREVIOUS can be removed. */
export interface ShardEpochStatus {
  declared: boolean;
  /** Why CLAIM_SHARD_PREVIOUS opens no epoch as written. */
  problems: string[];
  /** Per source whose layout the epoch changes: whether its new shards all hold the epoch closed. */
  sources: Record<string, { epoch: string; closed: boolean; previousShardsPending: number | null }>;
  /** Every source's handover is done: remove CLAIM_SHARD_PREVIOUS and deploy. */
  removable: boolean;
  /** ISO time after which it is removable whatever the handover did: every key of the old layout past retention. */
  removableBy: string | null;
  advice: string;
}

/**
 * The two ways an epoch may end: its handover done (the cron's record), or the old layout's keys all past the longest
 * dedupe retention (a tombstone lives at most two windows: src/claims/partitions.ts), whatever the handover did.
 */
export async function shardEpochStatus(
  env: Env,
  sources: readonly SourceConfig[],
  now: number,
): Promise<ShardEpochStatus> {
  const { epoch, problems } = shardEpoch(env);
  const empty = { sources: {}, removable: false, removableBy: null };
  if (problems.length > 0)
    return { declared: true, problems, ...empty, advice: "CLAIM_SHARD_PREVIOUS is not understood: fix it (problems)." };
  if (!epoch) return { declared: false, problems, ...empty, advice: "No shard epoch is declared." };
  const record = (await readCheckpoint<EpochRecord>(env, "*", SHARD_EPOCH_CHECKPOINT).catch(() => null)) ?? {};
  const currentShards = shardCount(env);
  const status: ShardEpochStatus["sources"] = {};
  let longestRetention = 0;
  for (const source of sources) {
    const layout = previousLayoutOf(epoch, source, currentShards);
    if (!layout) continue;
    longestRetention = Math.max(longestRetention, source.dedupeRetentionMs);
    const progress = record[source.name]?.epoch === layout.epoch ? record[source.name] : undefined;
    status[source.name] = {
      epoch: layout.epoch,
      closed: progress?.closed ?? false,
      previousShardsPending: progress
        ? Array.from({ length: layout.shards }, (_, index) => index).filter((index) => progress.cursors[index] !== null)
            .length
        : null,
    };
  }
  const removableBy = new Date(epoch.since + 2 * longestRetention).toISOString();
  const open = Object.entries(status).filter(([, source]) => !source.closed);
  if (Object.keys(status).length === 0)
    return {
      declared: true,
      problems,
      ...empty,
      removable: true,
      advice: "CLAIM_SHARD_PREVIOUS names the layout in use: no key moved; remove it and deploy.",
    };
  const removable = open.length === 0 || now >= Date.parse(removableBy);
  return {
    declared: true,
    problems,
    sources: status,
    removable,
    removableBy,
    advice: removable
      ? "Every key of the previous layout is with its new shard (or past retention): remove CLAIM_SHARD_PREVIOUS and deploy."
      : `The handover is under way for ${open.map(([name]) => name).join(", ")}: keep CLAIM_SHARD_PREVIOUS until it is done, at the latest until ${removableBy}.`,
  };
}
