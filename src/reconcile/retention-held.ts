import { and, asc, eq, gt, inArray, lt, or, type SQL, sql } from "drizzle-orm";
import { deleteStoredBodies } from "../bodies/stored-bodies";
import { batchEach } from "../db/batch";
import type { Database } from "../db/client";
import { inJsonList } from "../db/id-list";
import { deliveries, HELD_BODY, receipts } from "../db/schema";
import { ulidFloor } from "../lib/ulid";
import type { SourceConfig } from "../sources/config";
import { type HeldBody, heldBodiesDue, PAYLOAD_EXPIRING_STATUSES } from "./retention-scan";

/**
 * Bodies the payload retention scan passed by: a dead letter keeps its body for its source's dead_letter_retention
 * (the key's lifetime unless set shorter), so an operator can still replay it after the fix ships; dismissed, or
 * replayed and finished, it goes at payload retention like any other. The scan's cursor cannot come back for those
 * (it moved on past the dead letter), so they are found through the partial index receipts_held_bodies
 * (migrations/0011), which holds only receipts that are or were dead letters (or replayed) and still have a body.
 *
 * A receipt whose own route finished but a further route's delivery is dead is a dead letter all the same: the body
 * scan passed it by, and it is found here through the partial index deliveries_dead once past its source's
 * dead-letter cutoff (dropDeadDeliveryBodies). No index is added for it: deliveries_dead exists already and holds
 * only dead further deliveries, so the happy path (which never writes a dead row) pays nothing.
 *
 * Rows read per run: every held body below its source's payload cutoff, i.e. the dead letters being kept and any
 * replays still under way, and every dead further delivery, never the source's traffic. A body in R2 is deleted
 * with its marker.
 */

/**
 * Whether the receipt has a further delivery in one of `statuses`: a seek on the deliveries primary key (receipt_id
 * first), which finds nothing for a receipt without further routes.
 */
export function furtherDeliveryIn(statuses: readonly (typeof deliveries.$inferSelect)["status"][]): SQL {
  return sql`EXISTS (SELECT 1 FROM ${deliveries} WHERE ${deliveries.receiptId} = ${receipts.receiptId} AND ${inArray(deliveries.status, [...statuses])})`;
}

/** Held bodies read per source per page. */
const HELD_PAGE = 1000;

interface HeldScan {
  source: string;
  payloadFloor: string;
  deadLetterFloor: string;
  position: string;
  done: boolean;
}

export async function dropHeldBodies(
  env: Env,
  db: Database,
  sources: readonly SourceConfig[],
  now: number,
  deadline: number,
): Promise<{ changed: number; caughtUp: boolean }> {
  const scans: HeldScan[] = sources.map((source) => ({
    source: source.name,
    payloadFloor: ulidFloor(now - source.payloadRetentionMs),
    deadLetterFloor: ulidFloor(now - source.deadLetterRetentionMs),
    position: "",
    done: false,
  }));
  let changed = 0;
  for (let page = 0; ; page++) {
    const active = scans.filter((scan) => !scan.done);
    if (active.length === 0 || (page > 0 && Date.now() >= deadline)) break;
    const pages = await batchEach(db, active, (scan) =>
      db
        .select({ id: receipts.receiptId, status: receipts.status })
        .from(receipts)
        .where(
          and(
            eq(receipts.source, scan.source),
            gt(receipts.receiptId, scan.position),
            lt(receipts.receiptId, scan.payloadFloor),
            HELD_BODY,
          ),
        )
        .orderBy(asc(receipts.receiptId))
        .limit(HELD_PAGE),
    );
    const due = { dead: [] as string[], finished: [] as string[] };
    for (const { item: scan, result } of pages) {
      const rows: HeldBody[] = result;
      const found = heldBodiesDue(rows, scan.deadLetterFloor);
      due.dead.push(...found.dead);
      due.finished.push(...found.finished);
      scan.position = rows.at(-1)?.id ?? scan.position;
      scan.done = rows.length < HELD_PAGE;
    }
    if (due.dead.length + due.finished.length === 0) continue;
    // Each id is dropped only if it is still in the state it was found due in (a replay or a restore since the read keeps it).
    const dropped = await db
      .update(receipts)
      .set({ body: null, bodyLocation: null, keptHeaders: null })
      .where(
        and(
          or(
            and(inJsonList(receipts.receiptId, due.dead), eq(receipts.status, "dead")),
            and(
              inJsonList(receipts.receiptId, due.finished),
              inArray(receipts.status, [...PAYLOAD_EXPIRING_STATUSES]),
              sql`NOT ${furtherDeliveryIn(["dead"])}`,
            ),
          ),
          // A further delivery still under way (a replay of its route) needs the body, whatever the receipt's own status.
          sql`NOT ${furtherDeliveryIn(["pending", "processing"])}`,
        ),
      )
      .returning({ id: receipts.receiptId });
    await deleteStoredBodies(
      env,
      dropped.map((row) => row.id),
    );
    changed += dropped.length;
  }
  const deadDeliveries = await dropDeadDeliveryBodies(env, db, sources, now, deadline);
  return {
    changed: changed + deadDeliveries.changed,
    caughtUp: scans.every((scan) => scan.done) && deadDeliveries.caughtUp,
  };
}

/**
 * Bodies of receipts kept only by a dead further delivery, once past the source's dead-letter cutoff. Each page is
 * one UPDATE over the deliveries_dead index, re-checking in the same statement that nothing of the receipt is
 * still under way; a dropped body leaves the page's condition, so pages follow one another until one is short.
 */
async function dropDeadDeliveryBodies(
  env: Env,
  db: Database,
  sources: readonly SourceConfig[],
  now: number,
  deadline: number,
): Promise<{ changed: number; caughtUp: boolean }> {
  const floors = JSON.stringify(
    sources.map((source) => ({ source: source.name, floor: ulidFloor(now - source.deadLetterRetentionMs) })),
  );
  let changed = 0;
  for (let page = 0; ; page++) {
    if (page > 0 && Date.now() >= deadline) return { changed, caughtUp: false };
    const dropped = await deadDeliveryBodiesPage(db, floors);
    await deleteStoredBodies(
      env,
      dropped.map((row) => row.id),
    );
    changed += dropped.length;
    if (dropped.length < HELD_PAGE) return { changed, caughtUp: true };
  }
}

/**
 * One page of dropDeadDeliveryBodies. CROSS JOIN fixes the join order: the deliveries_dead index outside (the dead
 * further deliveries, few), each receipt by its primary key inside; left to itself the planner would read every
 * receipt of the source through (source, event_key).
 */
export function deadDeliveryBodiesPage(db: Database, floors: string) {
  return db
    .update(receipts)
    .set({ body: null, bodyLocation: null, keptHeaders: null })
    .where(
      and(
        inArray(
          receipts.receiptId,
          sql`(SELECT d.receipt_id FROM ${deliveries} AS d INDEXED BY deliveries_dead
            CROSS JOIN ${receipts} AS r
            CROSS JOIN (SELECT value ->> 'source' AS source, value ->> 'floor' AS floor FROM json_each(${floors})) AS c
            WHERE r.id = d.receipt_id AND r.source = c.source AND d.status = 'dead' AND d.receipt_id < c.floor
              AND (r.body IS NOT NULL OR r.body_location IS NOT NULL)
              AND r.status IN ('processed', 'stale', 'skipped', 'dismissed', 'dead')
            LIMIT ${HELD_PAGE})`,
        ),
        inArray(receipts.status, [...PAYLOAD_EXPIRING_STATUSES, "dead"]),
        sql`NOT ${furtherDeliveryIn(["pending", "processing"])}`,
      ),
    )
    .returning({ id: receipts.receiptId });
}
