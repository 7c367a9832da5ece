import { sql } from "drizzle-orm";

/**
 * D1's own clock, in epoch ms, read inside the statement that uses it. D1 runs one write at a time, so values
 * written with it are in commit order: a read at D1 time R has seen every row written before R. The relay writes
 * `relayed_at` with it, and receipt paging relies on that (src/admin/receipt-cursor.ts).
 */
export const d1NowMs = sql<number>`CAST(unixepoch('subsec') * 1000 AS INTEGER)`;
