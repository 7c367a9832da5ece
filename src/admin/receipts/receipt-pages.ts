import {
  type CaughtUp,
  type DatabaseReadState,
  type Direction,
  encodePagesCursor,
  type ReceiptCursor,
} from "./receipt-cursor";
import type { Page, ReceiptSummary } from "./receipt-slice";

/**
 * A receipt (or quarantine) page from what each database returned for it (receipt-slice.ts `readReceiptSlice`,
 * `readQuarantineSlice`): the caught-up rows first, then the rows ahead of the cursor merged by id. One database gives exactly the single-database page.
 *
 * Why none is skipped across databases: every database read its own first `limit + 1` rows past the shared id
 * boundary, so any row among the first `limit` of the union is among the first `limit` of its own database and
 * was read; the page takes the union's first rows and moves the boundary to the last one shown, so the ids passed
 * are exactly the ids shown (as seen at each database's read). Each database then keeps receipt-cursor.ts's
 * argument on its own clock: the cursor carries that database's read time, and the next page catches up on
 * whatever it relayed behind the boundary since.
 */

/** What one database returned for a page: its clock at the read, the rows caught up behind the cursor, the rows ahead. */
export interface DatabaseSlice<T> {
  binding: string;
  /** The read state this database was read with (the cursor's, or none on a first page). */
  readWith: DatabaseReadState;
  readAt: number;
  /** Rows relayed (or entered the filtered status) behind the reader since its last read here, in catch-up order. */
  caughtUp: CaughtUp<T>[];
  /** The first `limit + 1` rows past the cursor, in the direction of travel. */
  ahead: T[];
}

export interface KeysetPage<T> {
  rows: T[];
  nextCursor: string | null;
  prevCursor: string | null;
}

/** The page for rows a relay inserted under ids minted on arrival (receipts, quarantine), `idOf` naming each row's id. */
export function keysetPage<T>(
  slices: readonly DatabaseSlice<T>[],
  cursor: { receiptId: string } | null,
  direction: Direction,
  limit: number,
  idOf: (row: T) => string,
): KeysetPage<T> {
  const byId = (a: T, b: T) => (idOf(a) < idOf(b) ? -1 : idOf(a) > idOf(b) ? 1 : 0);
  const byCatchUp = (a: CaughtUp<T>, b: CaughtUp<T>) => a.at - b.at || byId(a.row, b.row);
  const freshRead = (rowId: string) =>
    encodePagesCursor(
      rowId,
      slices.map((slice) => [slice.binding, { readAt: slice.readAt, caughtUpTo: null }] as const),
    );
  const caughtUp = slices
    .flatMap((slice) => slice.caughtUp.map((entry) => ({ binding: slice.binding, ...entry })))
    .sort(byCatchUp);
  if (cursor && caughtUp.length > limit) {
    // More arrived behind the reader than a page holds: this page is all catch-up, and the next one resumes it,
    // in each database from the last of its rows listed here (a prefix of its own, as the order is one order).
    const shown = caughtUp.slice(0, limit);
    const resume = encodePagesCursor(
      cursor.receiptId,
      slices.map((slice) => {
        const last = shown.filter((entry) => entry.binding === slice.binding).at(-1);
        return [
          slice.binding,
          last
            ? { readAt: slice.readWith.readAt, caughtUpTo: { at: last.at, receiptId: idOf(last.row) } }
            : slice.readWith,
        ] as const;
      }),
    );
    const back = freshRead(cursor.receiptId);
    const rows = shown.map((entry) => entry.row);
    return direction === "older"
      ? { rows, nextCursor: resume, prevCursor: back }
      : { rows, nextCursor: back, prevCursor: resume };
  }
  const room = limit - caughtUp.length;
  const ahead = slices.flatMap((slice) => slice.ahead).sort(direction === "older" ? (a, b) => byId(b, a) : byId);
  const more = ahead.length > room;
  const page = ahead.slice(0, room);
  if (direction === "newer") page.reverse();
  const at = (rowId: string | undefined) => (rowId === undefined ? null : freshRead(rowId));
  const first = at(page[0] ? idOf(page[0]) : cursor?.receiptId);
  const last = at(page.at(-1) ? idOf(page.at(-1)!) : cursor?.receiptId);
  return {
    rows: [...caughtUp.map((entry) => entry.row), ...page],
    nextCursor: direction === "newer" || more ? last : null,
    prevCursor: direction === "newer" ? (more ? first : null) : cursor ? first : null,
  };
}

export function receiptPage(
  slices: readonly DatabaseSlice<ReceiptSummary>[],
  cursor: Pick<ReceiptCursor, "receiptId"> | null,
  direction: Direction,
  limit: number,
): Page<ReceiptSummary> {
  const { rows, ...cursors } = keysetPage(slices, cursor, direction, limit, (row) => row.receiptId);
  return { receipts: rows, ...cursors };
}
