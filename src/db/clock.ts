import { type Placeholder, type SQL, sql } from "drizzle-orm";
import { receipts } from "./schema";

/**
 * D1's own clock, in epoch ms, read inside the statement that uses it. D1 runs one write at a time, so values
 * written with it are in commit order: a read at D1 time R has seen every row written before R. The relay writes
 * `relayed_at` with it, and receipt paging relies on that (src/admin/receipts/receipt-cursor.ts).
 */
export const d1NowMs = sql<number>`CAST(unixepoch('subsec') * 1000 AS INTEGER)`;

/**
 * `relayed_at` for the receipts of one relay batch (one D1 transaction): D1's clock, read once, so the batch's
 * rows share one value (a relay batch is told apart by it). The batch's first receipt takes the clock; every
 * other one copies it from that row, written a moment before in the same transaction. A first row written by an
 * earlier relay (a repeat after a crash) is older than a second and is not copied: the row takes the clock itself.
 * Either way the value is a D1 clock reading taken inside the batch's own transaction. `firstReceiptId` is null for
 * the first receipt itself.
 */
export function relayBatchClock(firstReceiptId: string | Placeholder | null): SQL {
  if (firstReceiptId === null) return d1NowMs;
  return sql`COALESCE((SELECT ${receipts.relayedAt} FROM ${receipts} WHERE ${receipts.receiptId} = ${firstReceiptId} AND ${receipts.relayedAt} >= ${d1NowMs} - 1000), ${d1NowMs})`;
}
