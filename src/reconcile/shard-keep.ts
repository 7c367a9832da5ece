import { shardIndex } from "../claims/routing";
import { readCheckpoint } from "../db/checkpoints";
import { logError } from "../lib/log";
import type { SourceConfig } from "../sources/config";
import { receiptDatabaseEnvs } from "../sources/databases";
import { isPartitioned } from "../sources/partitions";
import { SHARD_KEEP_CHECKPOINT } from "./retention";
import { mergeShardKeeps, type ShardKeep } from "./retention-scan";

/**
 * What the shard sweep may forget, from what each database's last key scan left (retention.ts). The sweep runs
 * before retention in a run, so it goes by the previous run's scan, and never past the time that scan checked.
 */
export async function readShardKeeps(env: Env): Promise<Map<string, ShardKeep>> {
  const found = await Promise.all(
    receiptDatabaseEnvs(env).map(({ binding, env: databaseEnv }) =>
      readCheckpoint<Record<string, ShardKeep>>(databaseEnv, "*", SHARD_KEEP_CHECKPOINT).catch((error: unknown) => {
        // A database that cannot be read only stops its sources' shards forgetting keys: the relay goes on.
        logError("reconcile.shard_keep_unreadable", error, { database: binding });
        return null;
      }),
    ),
  );
  const keeps = new Map<string, ShardKeep>();
  // A source that moved has a keep in each database it has receipts in: the shards go by both.
  for (const bySource of found)
    for (const [source, keep] of Object.entries(bySource ?? {}))
      keeps.set(source, mergeShardKeeps(keeps.get(source), keep));
  return keeps;
}

/**
 * One shard's prune: tombstones received before `keyCutoff` go, except `keepKeys`. Before any key scan, none go,
 * except for a partitioned source: no key scan visits the ring (its databases are emptied whole), so its keys go on
 * its retention alone, or on the key scan of the database it lived in before, which still holds some of its receipts.
 */
export function shardPrune(
  keep: ShardKeep | undefined,
  source: SourceConfig,
  now: number,
  shard: number,
  shards: number,
): { keyCutoff: number; keepKeys: string[] } {
  if (!keep) return { keyCutoff: isPartitioned(source) ? now - source.dedupeRetentionMs : 0, keepKeys: [] };
  return {
    keyCutoff: Math.min(now - source.dedupeRetentionMs, keep.checkedBefore),
    keepKeys: keep.keys.filter((key) => shardIndex(key, shards) === shard),
  };
}
