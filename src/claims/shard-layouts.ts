/**
 * Every claim shard the receiver has ever addressed, so none is forgotten when the config stops naming it.
 *
 * A shard is named "<source>#<index>" inside its source's jurisdiction (./routing.ts). Lowering CLAIM_SHARD_COUNT
 * (8 → 4), changing a source's jurisdiction or removing the source leaves shards the claim path never reaches
 * again. They still hold what they held: claims not yet relayed (acknowledged work) and tombstones waiting for
 * retention. Their own alarm relays the claims, unless it was lost, and only the cron's visit ever prunes them.
 * So the cron remembers, per source and jurisdiction, the highest shard count it has seen in use, and visits
 * every shard below it that the config no longer names (a retired shard) until the shard holds nothing.
 *
 * Pure decisions only; the cron's reading and writing of this record is src/reconcile/shard-layouts.ts.
 */

/** The count a deployment has unless it sets CLAIM_SHARD_COUNT (wrangler.toml, ./routing.ts). */
export const SHIPPED_SHARD_COUNT = 8;
/** The most CLAIM_SHARD_COUNT may say (./routing.ts); the capacity model names it when a rate needs more. */
export const MAX_SHARD_COUNT = 1024;

/** One jurisdiction's shards of one source: indices below `shards` were addressed; `drained` hold nothing now. */
export interface LayoutRecord {
  shards: number;
  drained: number[];
}

/** Per source, per jurisdiction ("" for none): what the cron has seen. */
export type ShardLayouts = Record<string, Record<string, LayoutRecord>>;

/** Where a source's shards are addressed today. */
export interface CurrentLayout {
  source: string;
  jurisdiction: DurableObjectJurisdiction | null;
  shards: number;
}

/** One shard the config no longer names. */
export interface RetiredShard {
  source: string;
  jurisdiction: DurableObjectJurisdiction | null;
  index: number;
}

const jurisdictionKey = (jurisdiction: DurableObjectJurisdiction | null): string => jurisdiction ?? "";

/**
 * The record with today's layouts added: a count only ever raises the high-water mark, and a shard addressed again
 * is no longer drained (it may hold claims again). A source the record has never seen starts at the shipped count
 * at least: shards may have been used before the record began (a deployment upgraded and shrunk at once), and a
 * visit to one that never existed finds it empty and drains it once.
 */
export function rememberLayouts(known: ShardLayouts, current: readonly CurrentLayout[]): ShardLayouts {
  const next = structuredClone(known);
  for (const { source, jurisdiction, shards } of current) {
    const bySource = next[source] ?? {};
    const floor = next[source] ? shards : Math.max(shards, SHIPPED_SHARD_COUNT);
    next[source] = bySource;
    const key = jurisdictionKey(jurisdiction);
    const record = bySource[key] ?? { shards: floor, drained: [] };
    bySource[key] = record;
    record.shards = Math.max(record.shards, shards);
    record.drained = record.drained.filter((index) => index >= shards);
  }
  return next;
}

/** Every remembered shard the current layouts do not name and that was not yet found empty, in a stable order. */
export function retiredShards(known: ShardLayouts, current: readonly CurrentLayout[]): RetiredShard[] {
  const live = new Map(current.map((layout) => [`${layout.source}\n${jurisdictionKey(layout.jurisdiction)}`, layout]));
  const retired: RetiredShard[] = [];
  for (const source of Object.keys(known).sort()) {
    for (const key of Object.keys(known[source]!).sort()) {
      const record = known[source]![key]!;
      const liveShards = live.get(`${source}\n${key}`)?.shards ?? 0;
      const drained = new Set(record.drained);
      for (let index = liveShards; index < record.shards; index++) {
        if (!drained.has(index))
          retired.push({ source, jurisdiction: key === "" ? null : (key as DurableObjectJurisdiction), index });
      }
    }
  }
  return retired;
}

/**
 * The record once `emptied` shards were found holding nothing. A layout's high-water mark comes down past its
 * drained top, so the record shrinks back to what is in use; a jurisdiction or source with nothing left goes.
 */
export function markDrained(known: ShardLayouts, emptied: readonly RetiredShard[]): ShardLayouts {
  const next = structuredClone(known);
  for (const { source, jurisdiction, index } of emptied) {
    const record = next[source]?.[jurisdictionKey(jurisdiction)];
    if (record && index < record.shards && !record.drained.includes(index)) record.drained.push(index);
  }
  for (const source of Object.keys(next)) {
    const bySource = next[source]!;
    for (const key of Object.keys(bySource)) {
      const record = bySource[key]!;
      const drained = new Set(record.drained);
      while (record.shards > 0 && drained.has(record.shards - 1)) drained.delete(--record.shards);
      record.drained = [...drained].sort((a, b) => a - b);
      if (record.shards === 0) delete bySource[key];
    }
    if (Object.keys(bySource).length === 0) delete next[source];
  }
  return next;
}
