import { and, eq, inArray } from "drizzle-orm";
import { type Database, database } from "../../db/client";
import { receipts } from "../../db/schema";
import { groupByDatabase } from "../receipts/receipt-databases";

/**
 * Dismissing a dead letter: the operator says "seen; the cause is fixed, or this one is not worth replaying".
 * The receipt becomes `dismissed` (kept, with its history and body until retention), which takes it out of the
 * dead count — so the source's health stops showing red and the cron resolves its dead-letter alert — without
 * applying anything. Restoring makes it `dead` again, and replayable. Only the status and the action's time move
 * (dismissed_at, restored_at: the latest of each, for the timeline); nothing else is touched, so a restored
 * receipt is processed exactly as the dead letter it was.
 */

export const MAX_DISMISS_IDS = 100;

export interface DismissReport {
  /** Receipts whose status changed. */
  changed: string[];
  /** Asked for, but not in the state the action starts from (not dead, not dismissed, or unknown). */
  unchanged: string[];
}

/**
 * @example
 *   await dismissDeadLetters(database(env), ["01JD…"]); // { changed: ["01JD…"], unchanged: [] }
 */
export async function dismissDeadLetters(
  db: Database,
  receiptIds: readonly string[],
  now = Date.now(),
): Promise<DismissReport> {
  if (receiptIds.length === 0) return { changed: [], unchanged: [] };
  const rows = await db
    .update(receipts)
    .set({ status: "dismissed", dismissedAt: now })
    .where(and(inArray(receipts.receiptId, [...receiptIds]), eq(receipts.status, "dead")))
    .returning({ receiptId: receipts.receiptId });
  return report(receiptIds, rows);
}

/** Back to the dead letters: dead again, and replayable. The dismissal's time stays, so the timeline shows both. */
export async function restoreDeadLetters(
  db: Database,
  receiptIds: readonly string[],
  now = Date.now(),
): Promise<DismissReport> {
  if (receiptIds.length === 0) return { changed: [], unchanged: [] };
  const rows = await db
    .update(receipts)
    .set({ status: "dead", restoredAt: now })
    .where(and(inArray(receipts.receiptId, [...receiptIds]), eq(receipts.status, "dismissed")))
    .returning({ receiptId: receipts.receiptId });
  return report(receiptIds, rows);
}

/** Dismisses by id wherever each receipt lives: one update per database holding some of them (just `DB` when alone). */
export function dismissAnywhere(env: Env, receiptIds: readonly string[], now = Date.now()): Promise<DismissReport> {
  return acrossDatabases(env, receiptIds, (db, ids) => dismissDeadLetters(db, ids, now));
}

/** Restores by id wherever each receipt lives. */
export function restoreAnywhere(env: Env, receiptIds: readonly string[], now = Date.now()): Promise<DismissReport> {
  return acrossDatabases(env, receiptIds, (db, ids) => restoreDeadLetters(db, ids, now));
}

async function acrossDatabases(
  env: Env,
  receiptIds: readonly string[],
  action: (db: Database, receiptIds: readonly string[]) => Promise<DismissReport>,
): Promise<DismissReport> {
  const groups = await groupByDatabase(env, receiptIds);
  const reports = await Promise.all(groups.map((group) => action(database(group.env), group.receiptIds)));
  return report(
    receiptIds,
    reports.flatMap((each) => each.changed.map((receiptId) => ({ receiptId }))),
  );
}

function report(asked: readonly string[], rows: { receiptId: string }[]): DismissReport {
  const changed = new Set(rows.map((row) => row.receiptId));
  return { changed: [...changed].sort(), unchanged: [...new Set(asked)].filter((id) => !changed.has(id)) };
}
