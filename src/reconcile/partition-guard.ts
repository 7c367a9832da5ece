import { count } from "../lib/meter";
import { quoted } from "./partition-archive";

/**
 * The check that a partition database holds exactly what was archived, made inside the batch that empties it
 * (partition-drop.ts), so nothing written between the archive and the drop (a late relay into an old period, a
 * replay) goes without being archived. A D1 batch is a transaction: the guard fails it, and with it every DROP,
 * when a table's row count is not its archived count.
 *
 * The guard is a table whose one column must be 1, created and dropped by the batch itself, so it never outlives the
 * batch and is never archived; each check inserts a 0 into it only when the counts differ, so a passing check writes
 * no row.
 */

const GUARD = "partition_drop_guard";

/** Statements that open the emptying batch: the guard table, then one check per table to be dropped. */
export function guardChecks(
  d1: D1Database,
  tables: readonly string[],
  archived: Readonly<Record<string, number>>,
): D1PreparedStatement[] {
  return [
    d1.prepare(`CREATE TABLE ${GUARD} (ok INTEGER NOT NULL CHECK (ok = 1))`),
    ...tables.map((table) =>
      d1
        .prepare(`INSERT INTO ${GUARD} (ok) SELECT 0 WHERE (SELECT COUNT(*) FROM ${quoted(table)}) <> ?`)
        .bind(archived[table] ?? 0),
    ),
  ];
}

/** The statement that closes the emptying batch: the guard table goes with it. */
export function guardEnd(d1: D1Database): D1PreparedStatement {
  return d1.prepare(`DROP TABLE ${GUARD}`);
}

/**
 * After the emptying batch failed: true when some table's rows are not its archived count (the guard refused, and
 * the batch left everything as it was), false when they match (the batch failed for another reason). A re-count,
 * not the error's text.
 */
export async function differsFromArchive(
  d1: D1Database,
  tables: readonly string[],
  archived: Readonly<Record<string, number>>,
): Promise<boolean> {
  const counted = await d1.batch<{ rows: number }>(
    tables.map((table) => d1.prepare(`SELECT COUNT(*) AS rows FROM ${quoted(table)}`)),
  );
  return counted.some((result, index) => result.results[0]!.rows !== (archived[tables[index]!] ?? 0));
}

/**
 * Deletes the archive pages from `firstStale` on (none, almost always: one R2 list past the last page written). Left
 * by an earlier archive of the same period, refused at the drop, that ran to more pages, they would hold rows twice.
 */
export async function deleteStalePages(bucket: R2Bucket, prefix: string, firstStale: number): Promise<void> {
  const startAfter = `${prefix}${String(firstStale - 1).padStart(6, "0")}.ndjson`;
  let cursor: string | undefined;
  do {
    const listed = await bucket.list({ prefix, startAfter, cursor });
    count("r2ClassA");
    if (listed.objects.length > 0) await bucket.delete(listed.objects.map((object) => object.key));
    cursor = listed.truncated ? listed.cursor : undefined;
  } while (cursor !== undefined);
}
