import type { SourceConfig } from "../sources/config";
import { previousOwnerOf } from "./epoch-config";
import { shardAt, shardFor } from "./routing";

/**
 * The receipt each event key of a source names in its claim shard, asked with the event key as the claim key: how
 * a shard-arbitrated receipt (a partitioned source's, which has no entry in D1's (source, event_key) index,
 * migrations/0023) is found by its key without reading a ring database, one Durable Object request per key. While a
 * shard epoch is open, a key its new owner has not learnt yet is asked of its previous owner too, as a claim does
 * (./shard.ts). A key held under its payload hash (one the signature does not cover, src/model/claims.ts) is not
 * found here: its receipt keeps its entry in the D1 index, where the caller looks next.
 */
export async function receiptIdsFromShards(
  env: Env,
  source: SourceConfig,
  eventKeys: readonly string[],
): Promise<Map<string, string>> {
  const found = await Promise.all(
    [...new Set(eventKeys)].map(async (eventKey) => {
      const known = await shardFor(env, source, eventKey).knownKey(source.name, eventKey);
      if (known) return [eventKey, known.receiptId] as const;
      const previous = previousOwnerOf(env, source, eventKey);
      const before = previous
        ? await shardAt(env, source.name, previous.jurisdiction, previous.index).knownKey(source.name, eventKey)
        : null;
      return before ? ([eventKey, before.receiptId] as const) : null;
    }),
  );
  return new Map(found.filter((entry) => entry !== null));
}
