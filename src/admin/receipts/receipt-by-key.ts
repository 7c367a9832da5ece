/** @module One receipt found by its source and event key: through the (source, event_key) index, or its claim shard. */
import { receiptIdsFromShards } from "../../claims/key-lookup";
import { database } from "../../db/client";
import { type ApiError, apiError } from "../../lib/errors";
import { databaseBindingOf, isPartitionedSource, receiptDatabaseBindingOf } from "../../sources/databases";
import { loadSources } from "../../sources/registry";
import { inFirstDatabase } from "./receipt-databases";
import { type ReceiptDetail, receiptDetail, receiptIdForEvent } from "./receipt-detail";
import { receiptNotFound } from "./receipt-not-found";

/**
 * The detail of the receipt a source holds under `eventKey`, or the 404 that says why there is none. A partitioned
 * source's receipt usually has no entry in D1's key index (its claim shard is its only arbiter, migrations/0023), and
 * a ring database holds a period's receipts: its key is asked of its claim shard, and the receipt read by id in its
 * partition. Every other receipt (and a partitioned source's whose key is held under its payload hash, or from before
 * the ring) is one index seek per database: the source's own first, then the others (a source that moved left its
 * older receipts where they were). Never a scan.
 */
export async function receiptByEventKey(env: Env, source: string, eventKey: string): Promise<ReceiptDetail> {
  const partitioned = partitionedSource(env, source);
  if (partitioned) {
    const receiptId = (await receiptIdsFromShards(env, partitioned, [eventKey])).get(eventKey);
    if (receiptId !== undefined) {
      const detail = await inFirstDatabase(
        env,
        (databaseEnv) => receiptDetail(database(databaseEnv), receiptId, env),
        receiptDatabaseBindingOf(env, source, receiptId),
      );
      // The shard holds keys as claim keys: a payload hash named as an event key finds another event's receipt.
      if (detail?.receipt.eventKey === eventKey) return detail;
      if (detail === null) throw await heldButNotInD1(env, receiptId);
    }
  }
  const detail = await inFirstDatabase(
    env,
    async (databaseEnv) => {
      const db = database(databaseEnv);
      const receiptId = await receiptIdForEvent(db, source, eventKey);
      return receiptId ? receiptDetail(db, receiptId, env) : null;
    },
    databaseBindingOf(env, source),
  );
  if (detail) return detail;
  if (partitioned)
    throw apiError(
      404,
      "event_not_found",
      "Neither this source's claim shards nor D1's key index hold this event key: never accepted, past the source's dedupe_retention, or received under a key the sender does not sign (held under its payload hash). Look the receipt up by its receipt id, or list the source's receipts by time (since and until): a ring database is not searched by event key.",
    );
  throw apiError(
    404,
    "event_not_found",
    "No receipt for this event key under this source (never accepted, or not yet relayed).",
  );
}

/** The valid partitioned source named, or null. */
function partitionedSource(env: Env, source: string) {
  return isPartitionedSource(env, source) ? (loadSources(env).get(source) ?? null) : null;
}

/**
 * A key its shard holds under a receipt no database has: past the ring's SQL window (archived, named by
 * receiptNotFound), or accepted and not yet relayed.
 */
async function heldButNotInD1(env: Env, receiptId: string): Promise<ApiError> {
  const notFound = await receiptNotFound(env, receiptId);
  if (notFound.code === "receipt_archived") return notFound;
  return apiError(
    404,
    "event_not_found",
    `This event key was accepted as receipt ${receiptId}, which is not in D1 yet (its claim shard relays it within seconds); try again shortly.`,
  );
}
