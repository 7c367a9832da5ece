import { sql, type SQL } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";

/**
 * `column IN (…values)` with a single bound parameter. D1 refuses more than 100 bound parameters in a statement,
 * and a consumer batch names far more receipts than that; json_each unpacks one JSON array instead.
 */
export function inJsonList(column: SQLiteColumn, values: readonly string[]): SQL {
  return sql`${column} IN (SELECT value FROM json_each(${JSON.stringify(values)}))`;
}
