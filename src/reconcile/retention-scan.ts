import { ulidTime } from "../lib/ulid";

/**
 * The decisions of a retention scan, as pure functions over one page of a source's receipts read in id order
 * below the source's cutoff. The I/O is retention.ts.
 */

export const TERMINAL_STATUSES = ["processed", "stale", "skipped", "dead", "dismissed"] as const;
const TERMINAL = new Set<string>(TERMINAL_STATUSES);
/**
 * Finished receipts whose body goes at payload retention. A dead letter keeps its body for the source's
 * dead_letter_retention instead, so it can still be replayed: the body scan passes it by and the held-bodies scan
 * (retention-held.ts) drops it then, or at payload retention once it is dismissed or replayed.
 */
export const PAYLOAD_EXPIRING_STATUSES = ["processed", "stale", "skipped", "dismissed"] as const;
const PAYLOAD_EXPIRING = new Set<string>(PAYLOAD_EXPIRING_STATUSES);

export interface ScannedReceipt {
  id: string;
  status: string;
  hasBody: boolean;
}

/** What a receipt's further deliveries (routes 2–16, `deliveries`) hold it in: one unfinished, else one dead, else nothing. */
export type FurtherHold = "unfinished" | "dead" | null;

/**
 * The status retention treats a receipt as having: every delivery of it counts, the receipt row's own and each
 * further route's. A further delivery still pending or processing keeps the receipt unfinished (body and key kept,
 * whatever their age), a dead one keeps it a dead letter (body kept for dead-letter retention), exactly as the
 * receipt's own status would.
 */
export function retentionStatus(ownStatus: string, further: FurtherHold): string {
  if (!TERMINAL.has(ownStatus) || further === null) return ownStatus;
  return further === "unfinished" ? "pending" : "dead";
}

/** What a scan does to a receipt below its cutoff: drop its body (payload retention) or delete it (dedupe retention). */
export type RetentionAction = "drop-body" | "delete";

/** Receipts of the page the action applies to now. Unfinished work (pending, processing) is never touched. */
export function dueForAction(page: readonly ScannedReceipt[], action: RetentionAction): string[] {
  return page
    .filter((row) => (action === "delete" ? TERMINAL.has(row.status) : PAYLOAD_EXPIRING.has(row.status) && row.hasBody))
    .map((row) => row.id);
}

/**
 * How far a saved cursor may move after a page: past every receipt that needs nothing more, up to the first one
 * that still does — unfinished when read, or changed between the read and the write (a replay). Such a receipt
 * holds the cursor until it is done; the scan itself reads on past it, so one held receipt never stops a run.
 */
export function advanceCursor(
  page: readonly ScannedReceipt[],
  done: ReadonlySet<string>,
  action: RetentionAction,
  from: string,
): { cursor: string; held: boolean } {
  let cursor = from;
  for (const row of page) {
    // A dead letter's body is the held-bodies scan's to drop: the body scan owes it nothing more.
    const needsMore = !done.has(row.id) && (action === "delete" || (row.hasBody && row.status !== "dead"));
    if (needsMore) return { cursor, held: true };
    cursor = row.id;
  }
  return { cursor, held: false };
}

/** A receipt found through the held-bodies index, below its source's payload cutoff. */
export interface HeldBody {
  id: string;
  status: string;
}

/**
 * Which held bodies go now, split by the status they were read with (the write re-checks it): a dead letter once
 * it is past the source's dead-letter cutoff (`deadLetterFloor`, the ULID floor of now − dead_letter_retention),
 * a dismissed or replayed-and-finished one at once (the page is below the payload cutoff already). Pending and
 * processing ones (a replay under way) wait.
 */
export function heldBodiesDue(
  page: readonly HeldBody[],
  deadLetterFloor: string,
): { dead: string[]; finished: string[] } {
  return {
    dead: page.filter((row) => row.status === "dead" && row.id < deadLetterFloor).map((row) => row.id),
    finished: page.filter((row) => PAYLOAD_EXPIRING.has(row.status)).map((row) => row.id),
  };
}

/**
 * When retention will drop a receipt's body, for operators (the admin API's receipt detail, the dashboard): its
 * source's dead-letter retention for a dead letter, payload retention for any other finished receipt, both counted
 * from when it was received. A time already past means the next cron run. Null when it has no body, when it is
 * unfinished (pending and processing receipts keep theirs whatever their age) or when no retention applies (a
 * source no longer configured).
 */
export function bodyDropsAt(
  receipt: { status: string; receivedAt: number; bodyRetained: boolean },
  retention: { payloadRetentionMs: number; deadLetterRetentionMs: number } | null,
): number | null {
  if (!receipt.bodyRetained || retention === null) return null;
  if (receipt.status === "dead") return receipt.receivedAt + retention.deadLetterRetentionMs;
  return PAYLOAD_EXPIRING.has(receipt.status) ? receipt.receivedAt + retention.payloadRetentionMs : null;
}

/**
 * The claim shards forget a key by its age alone, and would forget one whose receipt is still unfinished in D1
 * (a resend would then be "accepted" again, stopped only by D1's unique key). So the key scan tells them what to
 * keep: the receipts it read below the dedupe cutoff and could not delete, i.e. unfinished work (O(pending), not
 * O(traffic): everything else below the cursor is gone), together with the time below which it checked every
 * receipt of the source. A shard forgets only tombstones received before that time and not in the list.
 */
export interface UndeletedKey {
  id: string;
  eventKey: string;
  payloadSha256: string;
}

export interface ShardKeep {
  /** Every receipt of the source received before this (epoch ms) was read by the key scan. */
  checkedBefore: number;
  /** The claim keys of those it could not delete: the event key, and the payload hash an unsigned key is claimed under. */
  keys: string[];
}

/** Receipts listed per source at most; past it, `checkedBefore` stops at the first one left out. */
export const MAX_KEPT_PER_SOURCE = 1000;

/** `undeleted` in id order; `checkedBefore` as far as the scan got (its cutoff when it caught up). */
export function shardKeepOf(undeleted: readonly UndeletedKey[], checkedBefore: number): ShardKeep {
  const listed = undeleted.slice(0, MAX_KEPT_PER_SOURCE);
  const firstLeftOut = undeleted[MAX_KEPT_PER_SOURCE];
  return {
    checkedBefore: firstLeftOut ? Math.min(checkedBefore, ulidTime(firstLeftOut.id)) : checkedBefore,
    keys: [...new Set(listed.flatMap((row) => [row.eventKey, row.payloadSha256]))],
  };
}

/**
 * The sources whose rows retention goes through in the database `binding`: each that lives there, and each other one
 * that still has rows there (`stillThere`): a source that moved to another database leaves its older receipts and
 * quarantine behind, and their bodies and keys expire on its retention all the same.
 */
export function sourcesRetainedIn<S extends { name: string; database: string }>(
  binding: string,
  sources: readonly S[],
  stillThere: ReadonlySet<string>,
): S[] {
  return sources.filter((source) => source.database === binding || stillThere.has(source.name));
}

/**
 * One source's ShardKeep from two databases' key scans (a source that moved has receipts in both): the shards may
 * forget only what both checked, and keep every key either could not delete.
 */
export function mergeShardKeeps(a: ShardKeep | undefined, b: ShardKeep): ShardKeep {
  if (!a) return b;
  return { checkedBefore: Math.min(a.checkedBefore, b.checkedBefore), keys: [...new Set([...a.keys, ...b.keys])] };
}
