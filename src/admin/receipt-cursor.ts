import { and, eq, gt, gte, lt, or, sql, type SQL } from "drizzle-orm";
import { receipts } from "../db/schema";
import { ulidFloor } from "../lib/ulid";

/**
 * Paging receipts without skipping late relays.
 *
 * Pages are keyset-paged on the receipt id (a ULID minted on arrival), but a receipt reaches D1 only when its
 * shard relays it: a relay held up (D1 down, a shard backing off) inserts a receipt whose id sorts among — or
 * above — receipts a reader has already paged past. So a cursor also carries the D1 time its page was read,
 * and the next page first lists every receipt the reader has passed that was relayed since ("caught up"),
 * then carries on down (or up) the ids.
 *
 * Why none is skipped: `relayed_at` is set by D1's own clock inside the relay's insert, and D1 runs one write
 * at a time, so a page read at D1 time R sees every receipt relayed before R, and every receipt it cannot see
 * has `relayed_at >= R`. Each page lists (a) the unseen part of the ids it passes and (b) every passed receipt
 * relayed at or after the previous page's R. By induction, after any page every receipt on the passed side with
 * `relayed_at` before that page's R has been listed. A receipt relayed in the very millisecond of a read may be
 * listed twice; none is left out.
 *
 * Finding (b) cheaply: a receipt relayed at or after R was either relayed late (more than LATE_RELAY_MS after
 * it was received: the partial index `receipts_late_relays`, which only such rows enter, so the happy path pays
 * nothing for it), or received at most LATE_RELAY_MS before R, and so has an id at or above ulidFloor(R -
 * LATE_RELAY_MS): a short range of the primary key.
 */

/** Must equal the literal in the partial index `receipts_late_relays` (migrations/0006_late_relays.sql). */
export const LATE_RELAY_MS = 10_000;

/** Relayed late: the condition of the partial index, written the same way so that D1 can use it. */
const relayedLate = sql`${receipts.relayedAt} > ${receipts.receivedAt} + 10000`;

export interface ReceiptCursor {
  /** The id the previous page ended at (older direction) or started at (newer direction). */
  receiptId: string;
  /** The D1 time the previous page was read; absent in a cursor written by hand (then no catch-up). */
  readAt: number | null;
  /** When the previous page was all catch-up and more remained: the last one listed, (relayed_at, id). */
  caughtUpTo: { relayedAt: number; receiptId: string } | null;
}

const ULID = "[0-9A-HJKMNP-TV-Z]{26}";
const CURSOR = new RegExp(`^(${ULID})(?:\\.(\\d{1,16})(?:\\.(\\d{1,16})\\.(${ULID}))?)?$`);

export function isReceiptCursor(text: string): boolean {
  return CURSOR.test(text);
}

export function decodeCursor(text: string): ReceiptCursor {
  const match = CURSOR.exec(text);
  if (!match) throw new TypeError("not a receipt cursor");
  return {
    receiptId: match[1]!,
    readAt: match[2] === undefined ? null : Number(match[2]),
    caughtUpTo: match[3] === undefined ? null : { relayedAt: Number(match[3]), receiptId: match[4]! },
  };
}

export function encodeCursor(cursor: ReceiptCursor): string {
  const base = cursor.readAt === null ? cursor.receiptId : `${cursor.receiptId}.${cursor.readAt}`;
  return cursor.caughtUpTo ? `${base}.${cursor.caughtUpTo.relayedAt}.${cursor.caughtUpTo.receiptId}` : base;
}

export type Direction = "older" | "newer";

/** The ids a reader going `direction` from `receiptId` has already passed. */
function passed(direction: Direction, receiptId: string): SQL {
  return direction === "older" ? gt(receipts.receiptId, receiptId) : lt(receipts.receiptId, receiptId);
}

/**
 * The two catch-up queries' conditions (late relays through the partial index; recent ids through the primary
 * key), or none for a cursor without a read time. Their union is every passed receipt relayed since the read.
 */
export function caughtUpConditions(cursor: ReceiptCursor, direction: Direction): { late: SQL; recent: SQL } | null {
  if (cursor.readAt === null) return null;
  const since = cursor.caughtUpTo
    ? or(gt(receipts.relayedAt, cursor.caughtUpTo.relayedAt), and(eq(receipts.relayedAt, cursor.caughtUpTo.relayedAt), gt(receipts.receiptId, cursor.caughtUpTo.receiptId)))!
    : gte(receipts.relayedAt, cursor.readAt);
  const behind = passed(direction, cursor.receiptId);
  return {
    late: and(relayedLate, since, behind)!,
    recent: and(gte(receipts.receiptId, ulidFloor(cursor.readAt - LATE_RELAY_MS)), since, behind)!,
  };
}

/** Catch-up rows from both queries: each once, in the order they were relayed. */
export function mergeCaughtUp<T extends { receiptId: string; relayedAt: number | null }>(late: readonly T[], recent: readonly T[]): T[] {
  const byId = new Map<string, T>();
  for (const row of [...late, ...recent]) byId.set(row.receiptId, row);
  return [...byId.values()].sort((a, b) => (a.relayedAt ?? 0) - (b.relayedAt ?? 0) || (a.receiptId < b.receiptId ? -1 : a.receiptId > b.receiptId ? 1 : 0));
}
