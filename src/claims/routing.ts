import type { ClaimShard } from "./shard";


/**
 * Which shard owns an event key. FNV-1a is stable across isolates and deploys, so every copy of one delivery
 * reaches the same single-threaded owner. Shards are per source: one busy source cannot slow another.
 */
export function shardIndex(eventKey: string, shardCount: number): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < eventKey.length; i++) {
    hash ^= eventKey.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0) % shardCount;
}

export function shardCount(env: Pick<Env, "CLAIM_SHARD_COUNT">): number {
  const parsed = Number(env.CLAIM_SHARD_COUNT);
  return Number.isInteger(parsed) && parsed > 0 && parsed <= 1024 ? parsed : 8;
}

export function shardName(source: string, index: number): string {
  return `${source}#${index}`;
}

export function shardFor(env: Env, source: string, eventKey: string): DurableObjectStub<ClaimShard> {
  const namespace = env.CLAIM_SHARDS;
  return namespace.get(namespace.idFromName(shardName(source, shardIndex(eventKey, shardCount(env)))));
}

/** Every shard of a source, for the cron's flush and retention sweeps. */
export function shardsOf(env: Env, source: string): DurableObjectStub<ClaimShard>[] {
  const namespace = env.CLAIM_SHARDS;
  return Array.from({ length: shardCount(env) }, (_, index) => namespace.get(namespace.idFromName(shardName(source, index))));
}
