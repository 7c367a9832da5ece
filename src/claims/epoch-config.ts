import { JURISDICTIONS, type SourceConfig } from "../sources/config";
import { shardCount, shardIndex } from "./routing";

/**
 * A shard epoch: the layout a deployment is leaving, declared in `[vars.CLAIM_SHARD_PREVIOUS]` while the claim
 * shards of the new layout learn every key the old one holds (docs/operating.md "Changing the shard count").
 *
 *   [vars.CLAIM_SHARD_PREVIOUS]
 *   shards = 8                          # the CLAIM_SHARD_COUNT being left (omit when only a placement changed)
 *   since = "2026-12-04T18:00:00Z"      # when the change was deployed: names the epoch
 *   jurisdictions = { payments = "" }   # per source whose jurisdiction changed: the one left ("" for none)
 *
 * While it is declared, a claim whose key the new owner has never seen asks the key's previous owner first
 * (./shard.ts), and the cron copies the previous owners' keys to their new owners (src/reconcile/shard-epoch.ts),
 * then tells the new shards the epoch is closed, after which they stop asking. The claim path reads only this
 * config and the shard: no D1 read joins the acknowledgement.
 */

export interface ShardEpoch {
  previousShards: number;
  /** Epoch ms of `since`. */
  since: number;
  /** Sources whose jurisdiction changed: the jurisdiction left (null: none). */
  previousJurisdictions: ReadonlyMap<string, DurableObjectJurisdiction | null>;
}

/** Where one source's shards were before the change, and the epoch's name in its shards' records. */
export interface PreviousLayout {
  epoch: string;
  shards: number;
  jurisdiction: DurableObjectJurisdiction | null;
}

/** The previous owner of one claim key: what the new owner consults while the epoch is open. */
export interface PreviousOwner {
  epoch: string;
  index: number;
  jurisdiction: DurableObjectJurisdiction | null;
}

export type EpochSetting = { epoch: ShardEpoch | null; problems: string[] };

const parsed = new WeakMap<object, EpochSetting>();

/** CLAIM_SHARD_PREVIOUS, read strictly: a value not understood is named in `problems` and declares no epoch. */
export function shardEpoch(env: object): EpochSetting {
  const value: unknown = (env as Record<string, unknown>).CLAIM_SHARD_PREVIOUS;
  if (value === undefined || value === null) return { epoch: null, problems: [] };
  if (typeof value !== "object" || Array.isArray(value)) {
    const shown = String(value).slice(0, 40);
    return {
      epoch: null,
      problems: [
        `CLAIM_SHARD_PREVIOUS is ${JSON.stringify(shown)}: it takes a table, [vars.CLAIM_SHARD_PREVIOUS] with shards and since; no epoch is open, so a key moved to a new shard is caught only by D1.`,
      ],
    };
  }
  const known = parsed.get(value);
  if (known) return known;
  const setting = parseEpoch(value as Record<string, unknown>, shardCount(env as Pick<Env, "CLAIM_SHARD_COUNT">));
  parsed.set(value, setting);
  return setting;
}

function parseEpoch(table: Record<string, unknown>, currentShards: number): EpochSetting {
  const problems: string[] = [];
  const where = "CLAIM_SHARD_PREVIOUS";
  for (const key of Object.keys(table))
    if (!["shards", "since", "jurisdictions"].includes(key))
      problems.push(`${where}.${key} is not a setting (shards, since, jurisdictions)`);
  const shards = table.shards ?? currentShards;
  if (typeof shards !== "number" || !Number.isInteger(shards) || shards < 1 || shards > 1024)
    problems.push(`${where}.shards is ${JSON.stringify(shards)}: it takes the shard count being left, 1 to 1024`);
  const since = typeof table.since === "string" ? Date.parse(table.since) : Number.NaN;
  if (Number.isNaN(since))
    problems.push(
      `${where}.since is ${JSON.stringify(table.since ?? null)}: it takes the date the change was deployed, e.g. "2026-12-04T18:00:00Z"`,
    );
  const previousJurisdictions = new Map<string, DurableObjectJurisdiction | null>();
  const listed = table.jurisdictions ?? {};
  if (typeof listed !== "object" || listed === null || Array.isArray(listed)) {
    problems.push(`${where}.jurisdictions takes a table: source name = the jurisdiction it left ("" for none)`);
  } else {
    for (const [source, left] of Object.entries(listed)) {
      if (left === "") previousJurisdictions.set(source, null);
      else if (JURISDICTIONS.includes(left as DurableObjectJurisdiction))
        previousJurisdictions.set(source, left as DurableObjectJurisdiction);
      else
        problems.push(
          `${where}.jurisdictions.${source} is ${JSON.stringify(left)}: it takes ${JURISDICTIONS.map((name) => `"${name}"`).join(", ")} or "" for none`,
        );
    }
  }
  if (problems.length > 0)
    return { epoch: null, problems: problems.map((problem) => `${problem}; no epoch is open until it is fixed.`) };
  return { epoch: { previousShards: shards as number, since, previousJurisdictions }, problems };
}

/** A source's layout before the change, or null when it has none in this epoch (its layout did not change). */
export function previousLayoutOf(
  epoch: ShardEpoch | null,
  source: Pick<SourceConfig, "name" | "placement">,
  currentShards: number,
): PreviousLayout | null {
  if (!epoch) return null;
  const current = source.placement.jurisdiction;
  const jurisdiction = epoch.previousJurisdictions.has(source.name)
    ? epoch.previousJurisdictions.get(source.name)!
    : current;
  if (epoch.previousShards === currentShards && jurisdiction === current) return null;
  // The name a shard records the epoch's close under: one per change, so a later change is a new epoch.
  const epochName = `${new Date(epoch.since).toISOString()}/${epoch.previousShards}/${jurisdiction ?? ""}`;
  return { epoch: epochName, shards: epoch.previousShards, jurisdiction };
}

/** The shard that owned `claimKey` before the change, or null when it owns it still (or no epoch is open). */
export function previousOwnerOf(env: Env, source: SourceConfig, claimKey: string): PreviousOwner | null {
  const currentShards = shardCount(env);
  const layout = previousLayoutOf(shardEpoch(env).epoch, source, currentShards);
  if (!layout) return null;
  const index = shardIndex(claimKey, layout.shards);
  if (index === shardIndex(claimKey, currentShards) && layout.jurisdiction === source.placement.jurisdiction)
    return null;
  return { epoch: layout.epoch, index, jurisdiction: layout.jurisdiction };
}
