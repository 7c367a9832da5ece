import { type SQL, sql } from "drizzle-orm";
import type { SQLiteColumn } from "drizzle-orm/sqlite-core";

/**
 * `column IN (…values)` with a single bound parameter. D1 refuses more than 100 bound parameters in a statement,
 * and a consumer batch names far more receipts than that; json_each unpacks one JSON array instead.
 */
export function inJsonList(column: SQLiteColumn, values: readonly string[]): SQL {
  return sql`${column} IN (SELECT value FROM json_each(${JSON.stringify(values)}))`;
}

/** `(first, second) IN (…pairs)` with a single bound parameter: a receipt fenced by the generation it was read at. */
export function inJsonPairs(
  first: SQLiteColumn,
  second: SQLiteColumn,
  pairs: readonly (readonly [string, number])[],
): SQL {
  return sql`(${first}, ${second}) IN (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(${JSON.stringify(pairs)}))`;
}
