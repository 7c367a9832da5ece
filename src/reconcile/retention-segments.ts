import { sql } from "drizzle-orm";
import { readBodies } from "../bodies/body-reader";
import {
  SEGMENT_LOCATION_PREFIX,
  segmentDay,
  segmentDayExpired,
  segmentDayPrefix,
  segmentSourcePrefix,
} from "../bodies/segment-format";
import { BODY_LOCATION_R2, putOwnBody } from "../bodies/stored-bodies";
import { database } from "../db/client";
import { HELD_BODY, ORDERED_OUTSTANDING } from "../db/schema";
import { failDuringLocalOutage } from "../lib/local-faults";
import { logEvent } from "../lib/log";
import { count } from "../lib/meter";
import type { SourceConfig } from "../sources/config";
import { receiptDatabaseEnvs } from "../sources/databases";

/**
 * Payload retention of bodies in segments (src/bodies/segment-format.ts), writing no D1 row per event: the cron deletes a
 * source's segments a whole day at a time once the day is past the source's payload_retention (list the day's
 * prefix, delete 1,000 keys per call; deletes are free in R2). A reader that finds a segment gone reports the body
 * dropped. The rows keep their `seg:` location: a location names where a body was, not that it is still there.
 *
 * Before a day goes, every body of it that must outlive payload retention is copied to an object of its own (keyed
 * by the receipt id, `body_location = 'r2'`, as a large body is), a row only for those few: dead letters, replays
 * under way, retries waiting, ordered deliveries held back (the receipts_held_bodies, receipts_retrying and
 * receipts_ordered_outstanding indexes) and receipts with a further delivery unfinished or dead (deliveries_unfinished,
 * deliveries_dead). Each is found through its index, never by reading the day's traffic. The copy and the row update
 * come before the delete, in that order: a crash in between only copies the same body again at the next run. A day
 * is deleted only once every database holding the source's receipts has been through (a source that moved left its
 * older receipts behind); until then it waits for the next run.
 *
 * Bounded per run: COPY_PAGE receipts per query and one list/delete page at a time until the deadline; what is left
 * is found again by the next run (copied receipts leave the query, deleted objects leave the listing), so R2 itself
 * is the cursor. A receipt pending in the queue with no retry scheduled (seconds, normally) is not in any index and
 * is not copied: a body cannot be in a day past retention and still be waiting for its first attempt unless the
 * queue has been down for longer than the source's payload retention.
 */

const COPY_PAGE = 100;
/** R2's list returns at most 1,000 keys and its delete takes at most 1,000. */
const DELETE_PAGE = 1000;

export interface SegmentRetentionCounts {
  bodiesCopiedOut: number;
  segmentsDeleted: number;
  caughtUp: boolean;
}

export async function expireSegments(
  env: Env,
  sources: readonly SourceConfig[],
  now: number,
  deadline: number,
): Promise<SegmentRetentionCounts> {
  const counts: SegmentRetentionCounts = { bodiesCopiedOut: 0, segmentsDeleted: 0, caughtUp: true };
  const bucket = env.BODIES;
  if (!bucket) return counts;
  for (const source of sources) {
    if (Date.now() >= deadline && counts.bodiesCopiedOut + counts.segmentsDeleted > 0) {
      counts.caughtUp = false;
      break;
    }
    const days = (await segmentDays(bucket, source.name)).filter((day) =>
      segmentDayExpired(day, source.payloadRetentionMs, now),
    );
    if (days.length === 0) continue;
    const copied = await copyOutKeptBodies(env, source, now, deadline);
    counts.bodiesCopiedOut += copied.copied;
    if (!copied.caughtUp) {
      counts.caughtUp = false;
      continue;
    }
    for (const day of days) {
      const deleted = await deleteDay(bucket, segmentDayPrefix(source.name, day), deadline);
      counts.segmentsDeleted += deleted.deleted;
      if (!deleted.caughtUp) {
        counts.caughtUp = false;
        break;
      }
    }
  }
  return counts;
}

/** The days a source has segments for, oldest first (one listing of the day prefixes: a handful of entries). */
async function segmentDays(bucket: R2Bucket, source: string): Promise<string[]> {
  const prefix = segmentSourcePrefix(source);
  const days: string[] = [];
  let cursor: string | undefined;
  do {
    count("r2ClassA");
    failDuringLocalOutage("r2");
    const listed = await bucket.list({ prefix, delimiter: "/", cursor });
    days.push(...listed.delimitedPrefixes.map((dayPrefix) => dayPrefix.slice(prefix.length, -1)));
    cursor = listed.truncated ? listed.cursor : undefined;
  } while (cursor);
  return days.sort();
}

async function deleteDay(
  bucket: R2Bucket,
  prefix: string,
  deadline: number,
): Promise<{ deleted: number; caughtUp: boolean }> {
  let deleted = 0;
  for (let page = 0; ; page++) {
    if (page > 0 && Date.now() >= deadline) return { deleted, caughtUp: false };
    count("r2ClassA");
    failDuringLocalOutage("r2");
    const listed = await bucket.list({ prefix, limit: DELETE_PAGE });
    const keys = listed.objects.map((object) => object.key);
    if (keys.length > 0) await bucket.delete(keys);
    deleted += keys.length;
    if (!listed.truncated) return { deleted, caughtUp: true };
  }
}

interface KeptBody {
  receiptId: string;
  source: string;
  eventKey: string;
  payloadSha256: string;
  receivedAt: number;
  keptHeaders: string | null;
  bodyLocation: string;
}

/** Copies out, in every database holding receipts, the bodies of the source's expiring days that must be kept. */
async function copyOutKeptBodies(
  env: Env,
  source: SourceConfig,
  now: number,
  deadline: number,
): Promise<{ copied: number; caughtUp: boolean }> {
  const from = `${SEGMENT_LOCATION_PREFIX}${segmentSourcePrefix(source.name)}`;
  // Locations sort by day: every one below this is in a day past retention.
  const before = `${from}${segmentDay(now - source.payloadRetentionMs)}`;
  let copied = 0;
  for (const { env: databaseEnv } of receiptDatabaseEnvs(env)) {
    const db = database(databaseEnv);
    let after = "";
    for (let page = 0; ; page++) {
      if (page > 0 && Date.now() >= deadline) return { copied, caughtUp: false };
      const due = await db.all<KeptBody>(keptBodiesPage(source.name, from, before, after));
      const read = await readBodies(env, due);
      const found = due.filter((row) => read.bodies.has(row.receiptId));
      for (const row of found) await putOwnBody(env.BODIES!, row, read.bodies.get(row.receiptId)!);
      for (const row of due.filter((kept) => read.corrupt.has(kept.receiptId)))
        logEvent("bodies.integrity_failed", { receipt: row.receiptId });
      // Only rows still where they were read: one written since (dropped by dead-letter retention) stays as it is.
      // A body whose segment is already gone is dropped, and the row says so: it is not looked for again.
      const gone = due.filter((row) => !read.bodies.has(row.receiptId) && !read.corrupt.has(row.receiptId));
      if (found.length + gone.length > 0)
        await db.run(sql`UPDATE receipts SET body_location = CASE WHEN id IN (SELECT value FROM json_each(${JSON.stringify(found.map((row) => row.receiptId))}))
            THEN ${BODY_LOCATION_R2} ELSE NULL END
          WHERE id IN (SELECT value FROM json_each(${JSON.stringify([...found, ...gone].map((row) => row.receiptId))}))
            AND body_location >= ${from} AND body_location < ${before}`);
      copied += found.length;
      if (due.length < COPY_PAGE) break;
      after = due.at(-1)!.receiptId;
    }
  }
  return { copied, caughtUp: true };
}

/**
 * The next receipts (in id order, after `after`) of the source with a body in a segment between `from` and
 * `before` that must outlive payload retention, each found through its own partial index (the literals repeat the
 * indexes' conditions so SQLite uses them).
 */
function keptBodiesPage(source: string, from: string, before: string, after: string) {
  const inDays = sql`body_location >= ${from} AND body_location < ${before}`;
  return sql`SELECT id AS receiptId, source, event_key AS eventKey, payload_sha256 AS payloadSha256,
      received_at AS receivedAt, kept_headers AS keptHeaders, body_location AS bodyLocation
    FROM receipts WHERE id IN (
      SELECT id FROM receipts WHERE source = ${source} AND ${HELD_BODY} AND status IN ('dead', 'pending', 'processing')
      UNION SELECT id FROM receipts WHERE next_attempt_at IS NOT NULL AND source = ${source}
      UNION SELECT id FROM receipts WHERE source = ${source} AND ${ORDERED_OUTSTANDING}
      UNION SELECT receipt_id FROM deliveries WHERE status IN ('pending', 'processing')
      UNION SELECT receipt_id FROM deliveries WHERE status = 'dead'
    ) AND source = ${source} AND ${inDays} AND id > ${after}
    ORDER BY id LIMIT ${COPY_PAGE}`;
}
