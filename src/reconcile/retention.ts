import { and, asc, gt, inArray, isNotNull, lt, or, sql } from "drizzle-orm";
import { deleteStoredBodies } from "../bodies/stored-bodies";
import { batchByName, batchEach } from "../db/batch";
import { readCheckpoint, writeCheckpoint } from "../db/checkpoints";
import { type Database, database } from "../db/client";
import { inJsonList } from "../db/id-list";
import { attempts, deliveries, receipts, replays } from "../db/schema";
import { ulidFloor, ulidTime } from "../lib/ulid";
import type { SourceConfig } from "../sources/config";
import { dropHeldBodies, furtherDeliveryIn } from "./retention-held";
import {
  advanceCursor,
  dueForAction,
  type FurtherHold,
  PAYLOAD_EXPIRING_STATUSES,
  type RetentionAction,
  retentionStatus,
  type ScannedReceipt,
  type ShardKeep,
  shardKeepOf,
  TERMINAL_STATUSES,
  type UndeletedKey,
} from "./retention-scan";
import { sourcesToRetain } from "./retention-sources";

/**
 * Retention in D1, for every source at once:
 *   after payload retention  the body (and kept headers) of a finished receipt is dropped; the row stays as the
 *                            keyed tombstone (source, event key, payload hash), so a late resend still answers
 *                            "duplicate"; a dead letter keeps its body until dead-letter retention (the key's
 *                            lifetime by default) or until it is dismissed (retention-held.ts);
 *   after dedupe retention   the tombstone itself goes — receipt (its committed_at is the event's one-effect
 *                            guard), its attempts and its replays together.
 * The claim shards forget their copy of a key on the same cutoff when the cron visits them, a time partition at a
 * time (src/claims/partitions.ts: between one and two windows after the key was received),
 * except the keys this scan could not delete (unfinished work), which it leaves them in `checkpoints` for the next
 * run's sweep (SHARD_KEEP_CHECKPOINT, retention-scan.ts).
 * Only terminal receipts are touched: pending and processing ones keep body and key whatever their age. A receipt
 * counts every delivery of it (retentionStatus): one whose further route's delivery is still pending or processing is
 * unfinished, one whose further delivery is dead is a dead letter, however its own route ended.
 *
 * Work per run follows the backlog: pages of RETENTION_BATCH receipts per source, one D1 batch per page for all
 * sources, until every source is caught up or the run's time budget is spent; the next run goes on from there.
 *
 * Receipt ids are ULIDs minted at received_at, so "received before the cutoff" is the id range below the cutoff's
 * floor, read along the primary key — receipts need no time index the happy path would pay for. Each action keeps
 * a cursor per source in `checkpoints` (everything of the source below it is done), so a run reads only receipts
 * it has not passed yet: the body scan does not re-read the weeks of tombstones whose bodies are already gone.
 * Rows read per page: the page, plus other sources' receipts in the same id range (the scan is along the id, not
 * the source), plus, for a receipt still unfinished below the cutoff, the stretch after it on each later run
 * until it finishes.
 *
 * One limit: a receipt first written to D1 after its cursor passed its id (relayed later than its source's
 * payload retention after it arrived, i.e. a D1 outage longer than that) keeps its body until its key expires.
 */

/** Receipts read per source per page. */
export const RETENTION_BATCH = 1000;
/** Wall time a run spends on retention at most; the rest waits for the next run. */
export const RETENTION_BUDGET_MS = 20_000;

export interface RetentionCounts {
  bodiesDropped: number;
  quarantineBodiesDropped: number;
  keysExpired: number;
  /** reconcile_runs rows older than RUN_HISTORY_MS. */
  runsForgotten: number;
  /** Whether everything due was done within the budget (false: the next run goes on). */
  caughtUp: boolean;
}

/** How long the cron's own run records are kept: one row per run, 288 a day. */
const RUN_HISTORY_MS = 35 * 86_400_000;
const CURSOR_NAMES: Record<RetentionAction, string> = { "drop-body": "retention-bodies", delete: "retention-keys" };
/** Per database (`source = '*'`): per source, the ShardKeep its claim shards prune by. */
export const SHARD_KEEP_CHECKPOINT = "retention-shard-keep";

/**
 * Retention in the database `env` points at, for every configured source (`configured`) with rows there: each that
 * lives there, and each that moved away and left receipts behind (retention-sources.ts).
 */
export async function applyRetention(
  env: Env,
  configured: readonly SourceConfig[],
  now: number,
  budgetMs = RETENTION_BUDGET_MS,
): Promise<RetentionCounts> {
  const deadline = Date.now() + budgetMs;
  const db = database(env);
  const runs = await untilDone(deadline, () =>
    db.run(
      sql`DELETE FROM reconcile_runs WHERE id IN (SELECT id FROM reconcile_runs WHERE clock < ${now - RUN_HISTORY_MS} LIMIT ${RETENTION_BATCH})`,
    ),
  );
  const sources = await sourcesToRetain(env, db, configured);
  if (sources.length === 0) {
    // The last source with rows here left them all: what its last key scan told the shards to keep goes too.
    if (Object.keys((await readCheckpoint(env, "*", SHARD_KEEP_CHECKPOINT)) ?? {}).length > 0)
      await writeCheckpoint(env, "*", SHARD_KEEP_CHECKPOINT, {}, now);
    return {
      bodiesDropped: 0,
      quarantineBodiesDropped: 0,
      keysExpired: 0,
      runsForgotten: runs.changed,
      caughtUp: runs.caughtUp,
    };
  }

  // Keys first: a deleted receipt takes its body with it.
  const keys = await scanBelowCutoffs(env, db, sources, now, "delete", deadline);
  const keyCutoffs = cutoffs(sources, (source) => now - source.dedupeRetentionMs);
  const quarantineDeleted = await untilDone(deadline, () =>
    db.run(sql`DELETE FROM quarantine WHERE id IN (
      SELECT q.id FROM ${cutoffTable(keyCutoffs)} JOIN quarantine AS q ON q.source = c.source AND q.received_at < c.cutoff LIMIT ${RETENTION_BATCH})`),
  );
  const bodies = await scanBelowCutoffs(env, db, sources, now, "drop-body", deadline);
  const heldBodies = await dropHeldBodies(env, db, sources, now, deadline);
  const bodyCutoffs = cutoffs(sources, (source) => now - source.payloadRetentionMs);
  const quarantineBodies = await untilDone(deadline, () =>
    db.run(sql`UPDATE quarantine SET body = NULL, kept_headers = NULL WHERE id IN (
      SELECT q.id FROM ${cutoffTable(bodyCutoffs)} JOIN quarantine AS q ON q.source = c.source AND q.received_at < c.cutoff
      WHERE q.body IS NOT NULL LIMIT ${RETENTION_BATCH})`),
  );
  return {
    bodiesDropped: bodies.changed + heldBodies.changed,
    quarantineBodiesDropped: quarantineBodies.changed,
    keysExpired: keys.changed,
    runsForgotten: runs.changed,
    caughtUp:
      runs.caughtUp &&
      keys.caughtUp &&
      quarantineDeleted.caughtUp &&
      bodies.caughtUp &&
      heldBodies.caughtUp &&
      quarantineBodies.caughtUp,
  };
}

interface SourceScan {
  source: string;
  floor: string;
  /** Where the next page starts. */
  position: string;
  /** What the checkpoint will say: everything of the source at or below it needs nothing more. */
  cursor: string;
  held: boolean;
  done: boolean;
  /** Receipts read that the key scan could not delete, in id order (the delete action only). */
  undeleted: UndeletedKey[];
}

/** Pages through every source's receipts below its cutoff, one D1 batch per page for all sources. */
async function scanBelowCutoffs(
  env: Env,
  db: Database,
  sources: readonly SourceConfig[],
  now: number,
  action: RetentionAction,
  deadline: number,
): Promise<{ changed: number; caughtUp: boolean }> {
  const saved = (await readCheckpoint<Record<string, string>>(env, "*", CURSOR_NAMES[action])) ?? {};
  const scans: SourceScan[] = sources.map((source) => {
    const from = typeof saved[source.name] === "string" ? saved[source.name]! : "";
    const retentionMs = action === "delete" ? source.dedupeRetentionMs : source.payloadRetentionMs;
    return {
      source: source.name,
      floor: ulidFloor(now - retentionMs),
      position: from,
      cursor: from,
      held: false,
      done: false,
      undeleted: [],
    };
  });
  let changed = 0;
  // At least one page per run, whatever the budget: every run makes progress.
  for (let page = 0; ; page++) {
    const active = scans.filter((scan) => !scan.done && scan.position < scan.floor);
    if (active.length === 0 || (page > 0 && Date.now() >= deadline)) break;
    const pages = (await batchEach(db, active, (scan) => pageOf(db, scan))).map(({ item: scan, result: rows }) => ({
      scan,
      rows,
      page: rows.map(
        (row): ScannedReceipt => ({
          id: row.id,
          status: retentionStatus(row.status, row.further),
          hasBody: row.hasBody === 1,
        }),
      ),
    }));
    const due = pages.flatMap(({ page }) => dueForAction(page, action));
    const done = new Set(due.length > 0 ? await apply(db, action, due) : []);
    // A body kept in R2 leaves with its row's marker, or with the row (an id without an object deletes nothing).
    await deleteStoredBodies(env, [...done]);
    changed += done.size;
    for (const { scan, page, rows } of pages) {
      if (action === "delete") scan.undeleted.push(...rows.filter((row) => !done.has(row.id)));
      if (!scan.held) Object.assign(scan, advanceCursor(page, done, action, scan.cursor));
      scan.position = page.at(-1)?.id ?? scan.position;
      scan.done = page.length < RETENTION_BATCH;
    }
  }
  const cursors = Object.fromEntries(scans.map((scan) => [scan.source, scan.cursor]));
  if (scans.some((scan) => scan.cursor !== (saved[scan.source] ?? "")))
    await writeCheckpoint(env, "*", CURSOR_NAMES[action], cursors, now);
  if (action === "delete") {
    const keeps: Record<string, ShardKeep> = Object.fromEntries(
      scans.map((scan) => {
        // Caught up: every receipt below the floor was read. Otherwise as far as the pages got.
        const checkedBefore =
          scan.done || scan.position >= scan.floor
            ? ulidTime(scan.floor)
            : scan.position === ""
              ? 0
              : ulidTime(scan.position);
        return [scan.source, shardKeepOf(scan.undeleted, checkedBefore)];
      }),
    );
    await writeCheckpoint(env, "*", SHARD_KEEP_CHECKPOINT, keeps, now);
  }
  return { changed, caughtUp: scans.every((scan) => scan.done || scan.position >= scan.floor) };
}

/**
 * One source's next receipts below its floor, in id order. `+source` keeps the planner on the primary key (the id
 * range) rather than the (source, event_key) index, which would read every receipt the source has. Each receipt's
 * further deliveries are read through the deliveries primary key (receipt_id first): a receipt without any (every
 * receipt of a one-route source) costs a seek that finds nothing, one with some reads its own rows, once per action.
 */
export function pageOf(db: Database, scan: Pick<SourceScan, "source" | "position" | "floor">) {
  return db
    .select({
      id: receipts.receiptId,
      status: receipts.status,
      // A body in an R2 segment goes with its whole segment (src/reconcile/retention-segments.ts): no row to write here.
      hasBody: sql<number>`(${receipts.body} IS NOT NULL OR (${receipts.bodyLocation} IS NOT NULL AND ${receipts.bodyLocation} NOT LIKE 'seg:%'))`,
      eventKey: receipts.eventKey,
      payloadSha256: receipts.payloadSha256,
      further: sql<FurtherHold>`(SELECT CASE
        WHEN MAX(${deliveries.status} IN ('pending', 'processing')) = 1 THEN 'unfinished'
        WHEN MAX(${deliveries.status} = 'dead') = 1 THEN 'dead' END
        FROM ${deliveries} WHERE ${deliveries.receiptId} = ${receipts.receiptId})`,
    })
    .from(receipts)
    .where(
      and(
        gt(receipts.receiptId, scan.position),
        lt(receipts.receiptId, scan.floor),
        sql`+${receipts.source} = ${scan.source}`,
      ),
    )
    .orderBy(asc(receipts.receiptId))
    .limit(RETENTION_BATCH);
}

/**
 * The action on the receipts found due, each statement re-checking that the receipt is still finished (a replay
 * since the read keeps it whole). A receipt, its attempts and its replays leave in one batch (one transaction):
 * the one-effect guard (committed_at) lives in the receipt row, so it lasts exactly as long as the key. Returns the
 * ids done.
 */
async function apply(db: Database, action: RetentionAction, ids: readonly string[]): Promise<string[]> {
  const finished = and(
    inJsonList(receipts.receiptId, ids),
    inArray(receipts.status, [...TERMINAL_STATUSES]),
    sql`NOT ${furtherDeliveryIn(["pending", "processing"])}`,
  );
  if (action === "drop-body") {
    const dropped = await db
      .update(receipts)
      .set({ body: null, bodyLocation: null, keptHeaders: null })
      .where(
        and(
          inJsonList(receipts.receiptId, ids),
          inArray(receipts.status, [...PAYLOAD_EXPIRING_STATUSES]),
          sql`NOT ${furtherDeliveryIn(["pending", "processing", "dead"])}`,
          or(isNotNull(receipts.body), isNotNull(receipts.bodyLocation)),
        ),
      )
      .returning({ id: receipts.receiptId });
    return dropped.map((row) => row.id);
  }
  const { deletedReceipts } = await batchByName(db, {
    deletedAttempts: db
      .delete(attempts)
      .where(inArray(attempts.receiptId, db.select({ id: receipts.receiptId }).from(receipts).where(finished))),
    deletedReplays: db
      .delete(replays)
      .where(inArray(replays.receiptId, db.select({ id: receipts.receiptId }).from(receipts).where(finished))),
    deletedDeliveries: db
      .delete(deliveries)
      .where(inArray(deliveries.receiptId, db.select({ id: receipts.receiptId }).from(receipts).where(finished))),
    deletedReceipts: db.delete(receipts).where(finished).returning({ id: receipts.receiptId }),
  });
  return deletedReceipts.map((row) => row.id);
}

/** A bounded statement repeated until it changes fewer rows than a batch, or the deadline passes (run once at least). */
async function untilDone(
  deadline: number,
  statement: () => Promise<D1Result>,
): Promise<{ changed: number; caughtUp: boolean }> {
  let changed = 0;
  do {
    const result = await statement();
    changed += result.meta.changes;
    if (result.meta.changes < RETENTION_BATCH) return { changed, caughtUp: true };
  } while (Date.now() < deadline);
  return { changed, caughtUp: false };
}

/** `[{source, cutoff}]` as JSON: one statement covers every source with its own cutoff. */
function cutoffs(sources: readonly SourceConfig[], cutoffOf: (source: SourceConfig) => number): string {
  return JSON.stringify(sources.map((source) => ({ source: source.name, cutoff: cutoffOf(source) })));
}

function cutoffTable(json: string) {
  return sql`(SELECT value ->> 'source' AS source, value ->> 'cutoff' AS cutoff FROM json_each(${json})) AS c`;
}
