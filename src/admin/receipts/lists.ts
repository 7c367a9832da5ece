import { database } from "../../db/client";
// Every bound database, a source filter or not: a source that moved left receipts in the database it moved from.
import { receiptDatabaseEnvs } from "../../sources/databases";
import { isPartitionDatabase } from "../../sources/partitions";
import type { ReceiptFilter } from "./filters";
import { type QuarantineList, readQuarantineSlice } from "./quarantine-slice";
import { byChange, type ChangesPage, type ChangesQuery, changesPage, readChanges } from "./receipt-changes";
import { cursorIn, type Direction, decodePagesCursor } from "./receipt-cursor";
import { keysetPage, receiptPage } from "./receipt-pages";
import { type Page, type ReceiptSummary, readReceiptSlice, receiptsMatching } from "./receipt-slice";

/**
 * The admin lists — receipts and dead letters, what changed since a cursor, quarantine — read across every
 * receipt database (src/sources/databases.ts), so an operator sees one list whichever database holds a receipt.
 * With a source filter only that source's database is read; with one database in all, that one: exactly the
 * reads a single database always cost. Otherwise each database is read once (one D1 call each, side by side) for
 * its own first `limit + 1` rows, and the merged list takes the first `limit`: whatever the order, a row among the
 * union's first `limit` is among its own database's first `limit`, so nothing is skipped.
 */

/**
 * Newest first, keyset-paged on the receipt id in both directions (`before` for older, `after` for newer). Times
 * are id ranges: ids are ULIDs minted on arrival. A cursor also carries each database's D1 time at its page's
 * read, and a page starts with the receipts relayed behind the reader since then (late relays have older ids), so
 * paging never skips a receipt: receipt-cursor.ts has the argument for one database, receipt-pages.ts for several.
 */
export async function searchReceipts(env: Env, filter: ReceiptFilter): Promise<Page<ReceiptSummary>> {
  const before = filter.before !== undefined ? decodePagesCursor(filter.before) : null;
  const after = filter.after !== undefined ? decodePagesCursor(filter.after) : null;
  // Paging towards newer receipts reads upwards from the cursor and turns the page round.
  const direction: Direction = after && !before ? "newer" : "older";
  const cursor = direction === "newer" ? after : before;
  const slices = await Promise.all(
    receiptDatabaseEnvs(env).map(async ({ binding, env: databaseEnv }) => {
      const matching = receiptsMatching(filter, !isPartitionDatabase(env, binding));
      const readWith = cursor ? cursorIn(cursor, binding) : null;
      const at = {
        direction,
        cursor: readWith,
        below: before?.receiptId,
        above: after?.receiptId,
        statuses: filter.statuses,
      };
      const slice = await readReceiptSlice(database(databaseEnv), matching, at, filter.limit);
      return { ...slice, binding, readWith: readWith ?? { readAt: null, caughtUpTo: null } };
    }),
  );
  return receiptPage(slices, cursor, direction, filter.limit);
}

/**
 * What changed since a cursor (receipt-changes.ts), across databases. The cursor is a change time on the
 * Worker's clock with the last receipt id, the same in every database, so the first `limit + 1` changes of each
 * merged by (changedAt, id) are the first of all.
 */
export async function receiptChanges(env: Env, query: ChangesQuery, now = Date.now()): Promise<ChangesPage> {
  const perDatabase = await Promise.all(
    receiptDatabaseEnvs(env).map(({ env: databaseEnv }) => readChanges(database(databaseEnv), query, now)),
  );
  const rows =
    perDatabase.length === 1
      ? perDatabase[0]!
      : perDatabase
          .flat()
          .sort(byChange)
          .slice(0, query.limit + 1);
  return changesPage(rows, query, now);
}

/**
 * Quarantined deliveries, newest first, paged by quarantine id (a ULID minted on arrival, like a receipt's) across
 * databases. A quarantine row is relayed like a receipt, so its cursor is a receipt cursor too (each database's read
 * time with the id boundary) and a page starts with the rows relayed behind the reader since: paging never skips one.
 */
export async function listQuarantine(
  env: Env,
  options: { source?: string; before?: string; limit: number },
): Promise<QuarantineList> {
  const cursor = options.before !== undefined ? decodePagesCursor(options.before) : null;
  const slices = await Promise.all(
    receiptDatabaseEnvs(env).map(async ({ binding, env: databaseEnv }) => {
      const readWith = cursor ? cursorIn(cursor, binding) : null;
      const slice = await readQuarantineSlice(database(databaseEnv), {
        source: options.source,
        cursor: readWith,
        limit: options.limit,
      });
      return { ...slice, binding, readWith: readWith ?? { readAt: null, caughtUpTo: null } };
    }),
  );
  const { rows, nextCursor } = keysetPage(slices, cursor, "older", options.limit, (row) => row.quarantineId);
  return { quarantine: rows, nextCursor };
}
