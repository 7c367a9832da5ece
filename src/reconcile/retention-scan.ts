/**
 * The decisions of a retention scan, as pure functions over one page of a source's receipts read in id order
 * below the source's cutoff. The I/O is retention.ts.
 */

export const TERMINAL_STATUSES = ["processed", "stale", "skipped", "dead", "dismissed"] as const;
const TERMINAL = new Set<string>(TERMINAL_STATUSES);

export interface ScannedReceipt {
  id: string;
  status: string;
  hasBody: boolean;
}

/** What a scan does to a receipt below its cutoff: drop its body (payload retention) or delete it (dedupe retention). */
export type RetentionAction = "drop-body" | "delete";

/** Receipts of the page the action applies to now. Unfinished work (pending, processing) is never touched. */
export function dueForAction(page: readonly ScannedReceipt[], action: RetentionAction): string[] {
  return page.filter((row) => TERMINAL.has(row.status) && (action === "delete" || row.hasBody)).map((row) => row.id);
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
    const needsMore = !done.has(row.id) && (action === "delete" || row.hasBody);
    if (needsMore) return { cursor, held: true };
    cursor = row.id;
  }
  return { cursor, held: false };
}
