import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { shardPrune } from "../../src/reconcile/shard-keep";
import { loadSources } from "../../src/sources/registry";

/**
 * No key scan visits the ring of receipt partitions (its databases are emptied whole), so a partitioned source's
 * claim shards forget its keys on its retention alone; any other source's still wait for a key scan of D1.
 */
describe("a partitioned source's shard keys", () => {
  it("go on its dedupe_retention without a key scan, where a one-database source's wait for one", () => {
    const now = Date.UTC(2026, 11, 4);
    const partitioned = loadSources(env).get("partitioned")!;
    expect(shardPrune(undefined, partitioned, now, 0, 8)).toEqual({
      keyCutoff: now - partitioned.dedupeRetentionMs,
      keepKeys: [],
    });
    expect(shardPrune(undefined, loadSources(env).get("demo")!, now, 0, 8)).toEqual({ keyCutoff: 0, keepKeys: [] });
  });
});
