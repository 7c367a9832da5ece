import { and, type Column, eq, gt, gte, lt, or, type SQL, sql } from "drizzle-orm";
import { LATE_RELAY_MS, relayedLate } from "../../db/late-relays";
import { receipts } from "../../db/schema";
import { ulidFloor } from "../../lib/ulid";

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
 *
 * Status-filtered lists. A filter on status matches something that changes: a receipt the reader has passed can
 * enter the filtered status after its place was read. For the resting statuses off the happy path (dead, dismissed,
 * stale, skipped), `status_entered_at` is D1's clock when the receipt last entered one (a trigger sets it inside
 * the write of the status, migrations/0013), so the argument above holds for it word for word: each page also lists
 * every passed receipt, relayed before the previous read, that entered the filtered status at or after that read
 * (the partial index `receipts_status_entered`). What a pass with such a filter guarantees, then: it lists every
 * receipt that has the status when its place is read, or enters it behind the reader before the last page is read;
 * none that keeps its status is listed twice; one that leaves the status and enters it again behind the reader is
 * listed again, for its new entry; one that leaves the status before its place is read is not listed (it did not
 * match when it could have been). A catch-up row carries its catch-up time: relayed_at for a late relay, else
 * status_entered_at, and the caught-up rows of a page are in that order, which a resumed catch-up continues.
 * For pending, processing and processed — the happy path, where a stamp would be a billed row per event — a pass
 * lists a receipt iff it has the status when its place is read: one that enters it behind the reader is not listed.
 */

export { LATE_RELAY_MS };

/** The statuses whose entry D1 stamps (migrations/0013): the condition of `receipts_status_entered`, written alike. */
export const RESTING_STATUSES: readonly string[] = ["dead", "dismissed", "stale", "skipped"];
const resting = sql`${receipts.status} IN ('dead', 'dismissed', 'stale', 'skipped')`;

/** Where a reader stands in one database: that database's D1 clock at the read, and an unfinished catch-up. */
export interface DatabaseReadState {
  /** The D1 time the previous page was read; absent in a cursor written by hand (then no catch-up). */
  readAt: number | null;
  /** When the previous page was all catch-up and more remained: the last one listed, (catch-up time, id). */
  caughtUpTo: { at: number; receiptId: string } | null;
}

export interface ReceiptCursor extends DatabaseReadState {
  /** The id the previous page ended at (older direction) or started at (newer direction). */
  receiptId: string;
}

const ULID = "[0-9A-HJKMNP-TV-Z]{26}";
const CURSOR = new RegExp(`^(${ULID})(?:\\.(\\d{1,16})(?:\\.(\\d{1,16})\\.(${ULID}))?)?$`);

export function isReceiptCursor(text: string): boolean {
  return CURSOR.test(text) || ACROSS.test(text);
}

export function decodeCursor(text: string): ReceiptCursor {
  const match = CURSOR.exec(text);
  if (!match) throw new TypeError("not a receipt cursor");
  return {
    receiptId: match[1]!,
    readAt: match[2] === undefined ? null : Number(match[2]),
    caughtUpTo: match[3] === undefined ? null : { at: Number(match[3]), receiptId: match[4]! },
  };
}

export function encodeCursor(cursor: ReceiptCursor): string {
  const base = cursor.readAt === null ? cursor.receiptId : `${cursor.receiptId}.${cursor.readAt}`;
  return cursor.caughtUpTo ? `${base}.${cursor.caughtUpTo.at}.${cursor.caughtUpTo.receiptId}` : base;
}

/**
 * Across databases (the admin lists read every receipt database, src/admin/receipts/lists.ts): one receipt id boundary
 * shared by every database, and each database's own read state, since each database has its own clock:
 * `ID~DB.readAt[.relayedAt.ID]~DB_EU.readAt…`; a database without a segment reads with no catch-up. A page read
 * from one database only (one database in all, or a source filter) writes the single-database form above. Either
 * form is taken anywhere: a source-filtered page reads its database's segment, and a single-database cursor's
 * state stands for every database (D1 clocks are wall clocks, near enough for the one page that reads a cursor
 * written before a second database was added).
 */
export interface PagesCursor {
  receiptId: string;
  /** Each database's read state, by binding name. */
  databases: ReadonlyMap<string, DatabaseReadState>;
  /** The state of a database the cursor does not name. */
  others: DatabaseReadState;
}

const BINDING = "[A-Za-z_][A-Za-z0-9_]{0,63}";
const SEGMENT = new RegExp(`^(${BINDING})\\.(\\d{1,16})(?:\\.(\\d{1,16})\\.(${ULID}))?$`);
const ACROSS = new RegExp(`^${ULID}(?:~${BINDING}\\.\\d{1,16}(?:\\.\\d{1,16}\\.${ULID})?)+$`);
const NO_CATCH_UP: DatabaseReadState = { readAt: null, caughtUpTo: null };

export function decodePagesCursor(text: string): PagesCursor {
  if (!ACROSS.test(text)) {
    const { receiptId, ...state } = decodeCursor(text);
    return { receiptId, databases: new Map(), others: state };
  }
  const [receiptId, ...segments] = text.split("~");
  const databases = new Map<string, DatabaseReadState>();
  for (const segment of segments) {
    const match = SEGMENT.exec(segment)!;
    databases.set(match[1]!, {
      readAt: Number(match[2]),
      caughtUpTo: match[3] === undefined ? null : { at: Number(match[3]), receiptId: match[4]! },
    });
  }
  return { receiptId: receiptId!, databases, others: NO_CATCH_UP };
}

/** The cursor as one database reads it. */
export function cursorIn(cursor: PagesCursor, binding: string): ReceiptCursor {
  return { receiptId: cursor.receiptId, ...(cursor.databases.get(binding) ?? cursor.others) };
}

/** A cursor at `receiptId` with each database's state; the single-database form when there is one database. */
export function encodePagesCursor(
  receiptId: string,
  states: readonly (readonly [binding: string, state: DatabaseReadState])[],
): string {
  if (states.length === 1) return encodeCursor({ receiptId, ...states[0]![1] });
  const segments = states
    .filter(([, state]) => state.readAt !== null)
    .map(
      ([binding, state]) =>
        `~${binding}.${state.readAt}${state.caughtUpTo ? `.${state.caughtUpTo.at}.${state.caughtUpTo.receiptId}` : ""}`,
    );
  return receiptId + segments.join("");
}

export type Direction = "older" | "newer";

/** The ids a reader going `direction` from `receiptId` has already passed. */
function passed(direction: Direction, receiptId: string): SQL {
  return direction === "older" ? gt(receipts.receiptId, receiptId) : lt(receipts.receiptId, receiptId);
}

/**
 * The catch-up queries' conditions (late relays through the partial index; recent ids through the primary key;
 * with a filter on a resting status, entries into it through theirs), or none for a cursor without a read time.
 * Their union is every passed receipt relayed since the read, and every one relayed before it that entered a
 * resting status since.
 */
export function caughtUpConditions(
  cursor: ReceiptCursor,
  direction: Direction,
  statuses?: readonly string[],
): { late: SQL; recent: SQL; entered: SQL | null } | null {
  if (cursor.readAt === null) return null;
  const since = relayedSinceRead(cursor, receipts.relayedAt, receipts.receiptId)!;
  const behind = passed(direction, cursor.receiptId);
  const enteredSince = relayedSinceRead(cursor, receipts.statusEnteredAt, receipts.receiptId)!;
  return {
    late: and(relayedLate, since, behind)!,
    recent: and(gte(receipts.receiptId, ulidFloor(cursor.readAt - LATE_RELAY_MS)), since, behind)!,
    // Relayed before the read: one relayed since is caught up by its relay, and listed once.
    entered: statuses?.some((status) => RESTING_STATUSES.includes(status))
      ? and(resting, enteredSince, lt(sql`coalesce(${receipts.relayedAt}, 0)`, cursor.readAt), behind)!
      : null,
  };
}

/**
 * Rows stamped (relayed, or entered a status) since the cursor's read, or after the last one a catch-up listed (by
 * that stamp, then id); null for a cursor without a read time. The same for any table whose rows a relay inserts
 * under ids minted on arrival.
 */
export function relayedSinceRead(cursor: DatabaseReadState, stampedAt: Column, rowId: Column): SQL | null {
  if (cursor.readAt === null) return null;
  if (!cursor.caughtUpTo) return gte(stampedAt, cursor.readAt);
  return or(
    gt(stampedAt, cursor.caughtUpTo.at),
    and(eq(stampedAt, cursor.caughtUpTo.at), gt(rowId, cursor.caughtUpTo.receiptId)),
  )!;
}

/** A caught-up row and its catch-up time (when it was relayed, or entered its status), the order of a catch-up. */
export interface CaughtUp<T> {
  row: T;
  at: number;
}

/** Catch-up rows from every query: each once, in catch-up order (at, then id). */
export function mergeCaughtUp<T extends { receiptId: string }>(
  ...lists: readonly (readonly CaughtUp<T>[])[]
): CaughtUp<T>[] {
  const byId = new Map<string, CaughtUp<T>>();
  for (const entry of lists.flat()) byId.set(entry.row.receiptId, entry);
  return [...byId.values()].sort(
    (a, b) => a.at - b.at || (a.row.receiptId < b.row.receiptId ? -1 : a.row.receiptId > b.row.receiptId ? 1 : 0),
  );
}
