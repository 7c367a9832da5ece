import { and, asc, eq, gt, inArray, lt, or } from "drizzle-orm";
import { deleteStoredBodies } from "../bodies/stored-bodies";
import { batchEach } from "../db/batch";
import type { Database } from "../db/client";
import { inJsonList } from "../db/id-list";
import { HELD_BODY, receipts } from "../db/schema";
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
 * Rows read per run: every held body below its source's payload cutoff, i.e. the dead letters being kept and any
 * replays still under way, never the source's traffic. A body in R2 is deleted with its marker.
 */

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
        or(
          and(inJsonList(receipts.receiptId, due.dead), eq(receipts.status, "dead")),
          and(inJsonList(receipts.receiptId, due.finished), inArray(receipts.status, [...PAYLOAD_EXPIRING_STATUSES])),
        ),
      )
      .returning({ id: receipts.receiptId });
    await deleteStoredBodies(
      env,
      dropped.map((row) => row.id),
    );
    changed += dropped.length;
  }
  return { changed, caughtUp: scans.every((scan) => scan.done) };
}
