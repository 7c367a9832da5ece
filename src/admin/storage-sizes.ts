import { shardName, shardsOf } from "../claims/routing";
import { D1_CAP_BYTES } from "../monitor/conditions";
import { d1Answers } from "../monitor/report";
import { loadSources } from "../sources/registry";

/**
 * How full the stores are: D1 (its size as D1 reports it after a trivial query, `meta.size_after`, against its
 * 10 GB cap) and each claim shard (its SQLite size, against a Durable Object's 10 GB). Asking a shard is one RPC,
 * so the stats ask only the shards of the one source they report on; /admin/api/health asks every shard.
 */
export interface StorageSizes {
  d1Bytes: number | null;
  d1CapBytes: number;
  /** d1Bytes / d1CapBytes, rounded to 4 places; null when D1 did not say. */
  d1UsedFraction: number | null;
  /** Each shard by name (`<source>#<index>`); null when not asked. */
  shards: { shard: string; bytes: number }[] | null;
  shardBytesTotal: number | null;
}

export async function storageSizes(env: Env, shardsOfSources: readonly string[] | null): Promise<StorageSizes> {
  const [d1, shards] = await Promise.all([
    d1Answers(env),
    shardsOfSources === null
      ? null
      : Promise.all(
          shardsOfSources.flatMap((source) =>
            shardsOf(env, source).map(async (stub, index) => ({ shard: shardName(source, index), bytes: await stub.storageBytes() })),
          ),
        ),
  ]);
  return {
    d1Bytes: d1.sizeBytes,
    d1CapBytes: D1_CAP_BYTES,
    d1UsedFraction: d1.sizeBytes === null ? null : Math.round((d1.sizeBytes / D1_CAP_BYTES) * 10_000) / 10_000,
    shards,
    shardBytesTotal: shards === null ? null : shards.reduce((total, shard) => total + shard.bytes, 0),
  };
}

/** Every configured source's name (none when SOURCES is unreadable). */
export function configuredSources(env: Env): string[] {
  try {
    return [...loadSources(env).keys()];
  } catch {
    return [];
  }
}
