import { claimEvent } from "../../claims/claim-event";
import { receiptIdsFromShards } from "../../claims/key-lookup";
import { database } from "../../db/client";
import { underIndexedKeys } from "../../db/receipt-keys";
import { receipts } from "../../db/schema";
import type { EventIdentity } from "../../providers/types";
import type { SourceConfig } from "../../sources/config";
import { receiptDatabaseEnvs } from "../../sources/databases";
import { isPartitioned } from "../../sources/partitions";
import { loadSources } from "../../sources/registry";

export interface CatchUpCounts {
  pages: number;
  /** False when the page budget ran out first; the next run resumes the scan. */
  completed: boolean;
  listed: number;
  alreadyReceived: number;
  /** Events the provider listed that we had never received, now claimed with provenance "reconciled". */
  missingClaimed: number;
  /** GitHub: failed deliveries we asked GitHub to send again. */
  redeliveriesRequested: number;
  /** GitHub: failed deliveries still missing after the most redeliveries we ask for; left to a human. */
  redeliveriesWithheld: number;
}

export interface ListedEvent {
  identity: EventIdentity;
  rawBody: Uint8Array;
}

/**
 * Keys of this source already received, out of `eventKeys`: one index seek per key in D1. A partitioned source's
 * receipts are spread over the ring and those its claim shard arbitrates have no entry in the index
 * (migrations/0023): every receipt database is asked for the keys it indexes (one query each for a whole page), and
 * the claim shards for the keys none of them holds, never a scan of a ring database.
 */
export async function keysAlreadyStored(
  env: Env,
  sourceName: string,
  eventKeys: readonly string[],
): Promise<Set<string>> {
  if (eventKeys.length === 0) return new Set();
  const source = loadSources(env).get(sourceName);
  if (!source || !isPartitioned(source)) return indexedKeysIn(env, sourceName, eventKeys);
  const indexed = await Promise.all(
    receiptDatabaseEnvs(env).map(({ env: databaseEnv }) => indexedKeysIn(databaseEnv, sourceName, eventKeys)),
  );
  const stored = new Set(indexed.flatMap((keys) => [...keys]));
  const fromShards = await receiptIdsFromShards(
    env,
    source,
    eventKeys.filter((eventKey) => !stored.has(eventKey)),
  );
  return new Set([...stored, ...fromShards.keys()]);
}

/** The keys out of `eventKeys` that one database's (source, event_key) index holds: one query for a whole page. */
async function indexedKeysIn(env: Env, sourceName: string, eventKeys: readonly string[]): Promise<Set<string>> {
  const stored = await database(env)
    .select({ eventKey: receipts.eventKey })
    .from(receipts)
    .where(underIndexedKeys(sourceName, eventKeys));
  return new Set(stored.map((row) => row.eventKey));
}

/**
 * Claims the listed events D1 does not hold, through the same claim path as a live delivery. The D1 lookup only
 * saves shard calls; the shard stays the arbiter, so an event that arrived live a moment ago answers "duplicate"
 * and nothing is applied twice.
 */
export async function claimMissing(
  env: Env,
  source: SourceConfig,
  events: readonly ListedEvent[],
  now: number,
): Promise<{ alreadyReceived: number; missingClaimed: number }> {
  const stored = await keysAlreadyStored(
    env,
    source.name,
    events.map((event) => event.identity.eventKey),
  );
  const unknown = events.filter((event) => !stored.has(event.identity.eventKey));
  const results = await Promise.all(
    unknown.map((event) =>
      claimEvent(env, {
        source,
        identity: event.identity,
        rawBody: event.rawBody,
        keptHeaders: { "content-type": "application/json" },
        receivedAt: now,
        provenance: "reconciled",
      }),
    ),
  );
  const missingClaimed = results.filter((result) => result.disposition === "accepted").length;
  return { alreadyReceived: events.length - missingClaimed, missingClaimed };
}
