import { stableBucket } from "../lib/stable-hash";
import { type ShardPlacement, type SourceConfig, SourceConfigError } from "../sources/config";
import { loadSources } from "../sources/registry";
import { MAX_SHARD_COUNT, SHIPPED_SHARD_COUNT } from "./shard-layouts";

/**
 * Which shard owns an event key. FNV-1a is stable across isolates and deploys, so every copy of one delivery
 * reaches the same single-threaded owner. Shards are per source: one busy source cannot slow another.
 */
export function shardIndex(eventKey: string, shardCount: number): number {
  return stableBucket(eventKey, shardCount);
}

export function shardCount(env: Pick<Env, "CLAIM_SHARD_COUNT">): number {
  const parsed = Number(env.CLAIM_SHARD_COUNT);
  return Number.isInteger(parsed) && parsed > 0 && parsed <= MAX_SHARD_COUNT ? parsed : SHIPPED_SHARD_COUNT;
}

export function shardName(source: string, index: number): string {
  return `${source}#${index}`;
}

/**
 * A claim shard's stub, named through the binding's type (worker-configuration.d.ts) rather than by importing the
 * class: the shard addresses its previous owner through this module, so an import here would be a circle.
 */
export type ClaimShardStub = ReturnType<Env["CLAIM_SHARDS"]["get"]>;

/** No hint and no jurisdiction: the object is created near the first request that reaches it. */
const NO_PLACEMENT: ShardPlacement = { locationHint: null, jurisdiction: null };

/**
 * A source's placement, from its config or by its name. Every caller must see the same placement for a source:
 * a jurisdiction is part of the object's id, so two placements would be two different shards. An unknown or
 * broken source has none (only read paths such as stats ask by name for those).
 */
export function placementOf(env: Pick<Env, "SOURCES">, source: string | SourceConfig): ShardPlacement {
  if (typeof source !== "string") return source.placement;
  try {
    return loadSources(env).get(source)?.placement ?? NO_PLACEMENT;
  } catch (error) {
    if (error instanceof SourceConfigError) return NO_PLACEMENT;
    throw error;
  }
}

/** How a shard's stub is obtained under a placement: which namespace makes the id, and the options of `get`. */
export function stubOptions(placement: ShardPlacement): {
  jurisdiction: DurableObjectJurisdiction | null;
  get: DurableObjectNamespaceGetDurableObjectOptions | undefined;
} {
  return {
    jurisdiction: placement.jurisdiction,
    get: placement.locationHint ? { locationHint: placement.locationHint } : undefined,
  };
}

function shardStub(env: Pick<Env, "CLAIM_SHARDS">, placement: ShardPlacement, name: string): ClaimShardStub {
  const options = stubOptions(placement);
  const namespace = options.jurisdiction ? env.CLAIM_SHARDS.jurisdiction(options.jurisdiction) : env.CLAIM_SHARDS;
  const id = namespace.idFromName(name);
  return options.get ? namespace.get(id, options.get) : namespace.get(id);
}

export function shardFor(env: Env, source: string | SourceConfig, eventKey: string): ClaimShardStub {
  const name = typeof source === "string" ? source : source.name;
  return shardStub(env, placementOf(env, source), shardName(name, shardIndex(eventKey, shardCount(env))));
}

/**
 * A shard by where it was addressed, for one the config may no longer name (a retired shard, ./shard-layouts.ts;
 * a previous owner in a shard epoch, ./epoch-config.ts): its jurisdiction is part of its id; a location hint only
 * matters when an object is created, and this one exists.
 */
export function shardAt(
  env: Pick<Env, "CLAIM_SHARDS">,
  source: string,
  jurisdiction: DurableObjectJurisdiction | null,
  index: number,
): ClaimShardStub {
  return shardStub(env, { locationHint: null, jurisdiction }, shardName(source, index));
}

/** Every shard of a source, for the cron's flush and retention sweeps. */
export function shardsOf(env: Env, source: string | SourceConfig): ClaimShardStub[] {
  const name = typeof source === "string" ? source : source.name;
  const placement = placementOf(env, source);
  return Array.from({ length: shardCount(env) }, (_, index) => shardStub(env, placement, shardName(name, index)));
}
