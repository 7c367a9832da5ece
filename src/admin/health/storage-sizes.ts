import { shardName, shardsOf } from "../../claims/routing";
import { D1_CAP_BYTES } from "../../monitor/conditions";
import { d1Answers } from "../../monitor/report";
import { receiptDatabaseEnvs } from "../../sources/databases";
import { loadSources } from "../../sources/registry";

/**
 * How full the stores are: each receipt database (its size as D1 reports it after a trivial query,
 * `meta.size_after`, against the 10 GB cap every D1 database has on its own) and each claim shard (its SQLite
 * size, against a Durable Object's 10 GB). Asking a shard is one RPC, so the stats ask only the shards of the one
 * source they report on; /admin/api/health asks every shard.
 */
export interface StorageSizes {
  /** The fullest database's size — `DB`'s when it is the only one — so d1UsedFraction says how near a cap D1 is. */
  d1Bytes: number | null;
  d1CapBytes: number;
  /** d1Bytes / d1CapBytes, rounded to 4 places; null when D1 did not say. */
  d1UsedFraction: number | null;
  /** Every receipt database by binding name, `DB` first; bytes null for one that did not answer. */
  d1Databases: { binding: string; bytes: number | null; usedFraction: number | null }[];
  /** Each shard by name (`<source>#<index>`); null when not asked. */
  shards: { shard: string; bytes: number }[] | null;
  shardBytesTotal: number | null;
}

export async function storageSizes(env: Env, shardsOfSources: readonly string[] | null): Promise<StorageSizes> {
  const [d1Databases, shards] = await Promise.all([
    Promise.all(
      receiptDatabaseEnvs(env).map(async ({ binding, env: databaseEnv }) => {
        const { sizeBytes } = await d1Answers(databaseEnv);
        return { binding, bytes: sizeBytes, usedFraction: usedFraction(sizeBytes) };
      }),
    ),
    shardsOfSources === null
      ? null
      : Promise.all(
          shardsOfSources.flatMap((source) =>
            shardsOf(env, source).map(async (stub, index) => ({
              shard: shardName(source, index),
              bytes: await stub.storageBytes(),
            })),
          ),
        ),
  ]);
  const sizes = d1Databases.flatMap((entry) => (entry.bytes === null ? [] : [entry.bytes]));
  const fullest = sizes.length === 0 ? null : Math.max(...sizes);
  return {
    d1Bytes: fullest,
    d1CapBytes: D1_CAP_BYTES,
    d1UsedFraction: usedFraction(fullest),
    d1Databases,
    shards,
    shardBytesTotal: shards === null ? null : shards.reduce((total, shard) => total + shard.bytes, 0),
  };
}

function usedFraction(bytes: number | null): number | null {
  return bytes === null ? null : Math.round((bytes / D1_CAP_BYTES) * 10_000) / 10_000;
}

/** Every configured source's name (none when SOURCES is unreadable). */
export function configuredSources(env: Env): string[] {
  try {
    return [...loadSources(env).keys()];
  } catch {
    return [];
  }
}
