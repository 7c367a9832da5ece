import type { BatchItem } from "drizzle-orm/batch";
import type { Database } from "./client";

/**
 * D1 batches (one call, one transaction) whose results are read by name, never by position: a statement added to
 * or removed from a batch cannot silently shift which result a caller reads. Positions exist only in here.
 */

type Statement = BatchItem<"sqlite">;
type ResultOf<S extends Statement> = S["_"]["result"];

/** Runs the named statements as one batch, in the order they are written; each result comes back under its name. */
export async function batchByName<T extends Record<string, Statement>>(
  db: Database,
  statements: T,
): Promise<{ [K in keyof T]: ResultOf<T[K]> }> {
  const names = Object.keys(statements) as (keyof T & string)[];
  const ordered: Statement[] = names.map((name) => statements[name]!);
  const results = ordered.length === 0 ? [] : await db.batch(ordered as [Statement, ...Statement[]]);
  return Object.fromEntries(names.map((name, index) => [name, results[index]])) as { [K in keyof T]: ResultOf<T[K]> };
}

/** Runs one statement per item as one batch; each result comes back beside the item it was built from. */
export async function batchEach<I, S extends Statement>(
  db: Database,
  items: readonly I[],
  statementFor: (item: I) => S,
): Promise<{ item: I; result: ResultOf<S> }[]> {
  if (items.length === 0) return [];
  const results = await db.batch(items.map(statementFor) as [S, ...S[]]);
  return items.map((item, index) => ({ item, result: results[index] as ResultOf<S> }));
}
