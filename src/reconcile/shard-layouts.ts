import { shardAt, shardCount } from "../claims/routing";
import type { SweepReport } from "../claims/shard";
import {
  type CurrentLayout,
  markDrained,
  type RetiredShard,
  rememberLayouts,
  retiredShards,
  type ShardLayouts,
} from "../claims/shard-layouts";
import { readCheckpoint, writeCheckpoint } from "../db/checkpoints";
import { logError } from "../lib/log";
import { DEFAULT_DEDUPE_RETENTION_MS, type SourceConfig } from "../sources/config";
import { sourceProblems } from "../sources/registry";

/**
 * The cron's record of every claim shard ever addressed (src/claims/shard-layouts.ts), kept in the default
 * database's `checkpoints` (`source = '*'`, `reconciler = 'shard-layouts'`), and its visits to the retired ones.
 */
export const SHARD_LAYOUTS_CHECKPOINT = "shard-layouts";
const LAYOUTS_SOURCE = "*";

/** Where each configured source's shards are addressed by this deployment. */
export function currentLayouts(env: Env, sources: readonly SourceConfig[]): CurrentLayout[] {
  const shards = shardCount(env);
  return sources.map((source) => ({ source: source.name, jurisdiction: source.placement.jurisdiction, shards }));
}

/**
 * Adds today's layouts to the record and writes it before any shard is visited, so a layout is remembered even
 * when every visit fails. Null when the record cannot be read: the run then visits only the current shards and
 * leaves the record alone (an empty one written back would forget every retired shard).
 */
export async function rememberShardLayouts(
  env: Env,
  current: readonly CurrentLayout[],
  now: number,
): Promise<ShardLayouts | null> {
  let known: ShardLayouts;
  try {
    known = (await readCheckpoint<ShardLayouts>(env, LAYOUTS_SOURCE, SHARD_LAYOUTS_CHECKPOINT)) ?? {};
  } catch (error) {
    logError("reconcile.shard_layouts_unreadable", error, {});
    return null;
  }
  const next = rememberLayouts(known, current);
  if (JSON.stringify(next) !== JSON.stringify(known)) await writeLayouts(env, next, now);
  return next;
}

/** One retired shard's visit: relay what it holds, forget what is past its source's dedupe retention. */
export interface RetiredVisit {
  shard: RetiredShard;
  visit: () => Promise<SweepReport & { holdsNothing: boolean }>;
}

/**
 * A visit for every retired shard in the record. Nobody dedupes against a retired shard, so its keys go at the
 * source's retention with none kept back; a source no longer configured goes by the default retention. A source
 * whose table is broken is not retired, only out of service until its fix: its shards wait for it, untouched, as
 * every shard of it did before this record (its retention is unknown and its tombstones still count once fixed).
 */
export function retiredVisits(
  env: Env,
  known: ShardLayouts,
  current: readonly CurrentLayout[],
  sources: readonly SourceConfig[],
  now: number,
  relayRounds: number,
): RetiredVisit[] {
  const retention = new Map(sources.map((source) => [source.name, source.dedupeRetentionMs]));
  const broken = sourceProblems(env);
  return retiredShards(known, current)
    .filter((shard) => !broken.has(shard.source))
    .map((shard) => ({
      shard,
      visit: () =>
        shardAt(env, shard.source, shard.jurisdiction, shard.index).drainRetired(
          now - (retention.get(shard.source) ?? DEFAULT_DEDUPE_RETENTION_MS),
          relayRounds,
        ),
    }));
}

/**
 * Takes the shards found holding nothing out of the record, read afresh so a layout another run added meanwhile
 * stays. A failed write only means they are visited once more.
 */
export async function forgetDrained(env: Env, emptied: readonly RetiredShard[], now: number): Promise<void> {
  if (emptied.length === 0) return;
  try {
    const known = (await readCheckpoint<ShardLayouts>(env, LAYOUTS_SOURCE, SHARD_LAYOUTS_CHECKPOINT)) ?? {};
    await writeLayouts(env, markDrained(known, emptied), now);
  } catch (error) {
    logError("reconcile.shard_layouts_unwritten", error, {});
  }
}

async function writeLayouts(env: Env, layouts: ShardLayouts, now: number): Promise<void> {
  try {
    await writeCheckpoint(env, LAYOUTS_SOURCE, SHARD_LAYOUTS_CHECKPOINT, layouts, now);
  } catch (error) {
    // The visits still go ahead; the next run writes the record again.
    logError("reconcile.shard_layouts_unwritten", error, {});
  }
}
