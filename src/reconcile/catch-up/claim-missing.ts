import { and, eq } from "drizzle-orm";
import { claimEvent } from "../../claims/claim-event";
import { database } from "../../db/client";
import { inJsonList } from "../../db/id-list";
import { receipts } from "../../db/schema";
import type { EventIdentity } from "../../providers/types";
import type { SourceConfig } from "../../sources/config";

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

/** Keys of this source that D1 already holds, out of `eventKeys`: one query for a whole page. */
export async function keysAlreadyStored(
  env: Env,
  sourceName: string,
  eventKeys: readonly string[],
): Promise<Set<string>> {
  if (eventKeys.length === 0) return new Set();
  const stored = await database(env)
    .select({ eventKey: receipts.eventKey })
    .from(receipts)
    // By (source, event_key): the arbiter's own index.
    .where(and(eq(receipts.source, sourceName), inJsonList(receipts.eventKey, eventKeys)));
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
