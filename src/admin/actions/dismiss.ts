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

/** What each action moves a receipt from and to, and which of its times it stamps. */
const MOVES = {
  dismiss: { from: "dead", to: "dismissed", stamp: (now: number) => ({ dismissedAt: now }) },
  // The dismissal's time stays, so the timeline shows both.
  restore: { from: "dismissed", to: "dead", stamp: (now: number) => ({ restoredAt: now }) },
} as const;

export type DeadLetterAction = keyof typeof MOVES;

/**
 * Dismisses dead letters, or restores dismissed ones, by id wherever each receipt lives: one update per database
 * holding some of them (just `DB` when alone).
 * @example
 *   await moveDeadLetters(env, "dismiss", ["01JD…"]); // { changed: ["01JD…"], unchanged: [] }
 */
export async function moveDeadLetters(
  env: Env,
  action: DeadLetterAction,
  receiptIds: readonly string[],
  now = Date.now(),
): Promise<DismissReport> {
  const groups = await groupByDatabase(env, receiptIds);
  const moved = await Promise.all(
    groups.map((group) => moveInDatabase(database(group.env), MOVES[action], group.receiptIds, now)),
  );
  return report(receiptIds, moved.flat());
}

async function moveInDatabase(
  db: Database,
  move: (typeof MOVES)[DeadLetterAction],
  receiptIds: readonly string[],
  now: number,
): Promise<{ receiptId: string }[]> {
  if (receiptIds.length === 0) return [];
  return db
    .update(receipts)
    .set({ status: move.to, ...move.stamp(now) })
    .where(and(inArray(receipts.receiptId, [...receiptIds]), eq(receipts.status, move.from)))
    .returning({ receiptId: receipts.receiptId });
}

function report(asked: readonly string[], rows: { receiptId: string }[]): DismissReport {
  const changed = new Set(rows.map((row) => row.receiptId));
  return { changed: [...changed].sort(), unchanged: [...new Set(asked)].filter((id) => !changed.has(id)) };
}
