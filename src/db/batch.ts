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
  return (await batchPerItem(db, { each: perItem(items, statementFor) })).each;
}

/** One kind of a batch's statements: one per item. A method, so a group of any item type fits `batchPerItem`. */
export interface PerItem<I, S> {
  readonly items: readonly I[];
  statementFor(item: I): S;
}

export function perItem<I, S>(items: readonly I[], statementFor: (item: I) => S): PerItem<I, S> {
  return { items, statementFor };
}

type PerItemResults<G> = {
  [K in keyof G]: G[K] extends PerItem<infer I, infer S extends Statement> ? { item: I; result: ResultOf<S> }[] : never;
};

/**
 * Runs several kinds of per-item statements as one batch, kind after kind in the order they are written: each
 * kind's results come back under its name, each beside the item it was built from.
 */
export async function batchPerItem<G extends Record<string, PerItem<unknown, Statement>>>(
  db: Database,
  groups: G,
): Promise<PerItemResults<G>> {
  return (await runPerItem(groups, (statements: Statement[]) =>
    db.batch(statements as [Statement, ...Statement[]]),
  )) as PerItemResults<G>;
}

type PreparedPerItemResults<G> = {
  [K in keyof G]: G[K] extends PerItem<infer I, D1PreparedStatement>
    ? { item: I; result: D1Result<Record<string, unknown>> }[]
    : never;
};

/**
 * `batchPerItem` for raw D1 statements (built by ./statement-template.ts): one D1 batch, each kind's results under
 * its name, each beside its item, as D1 returns them (rows keyed by column name).
 */
export async function batchPreparedPerItem<G extends Record<string, PerItem<unknown, D1PreparedStatement>>>(
  d1: D1Database,
  groups: G,
): Promise<PreparedPerItemResults<G>> {
  return (await runPerItem(groups, (statements: D1PreparedStatement[]) =>
    d1.batch(statements),
  )) as PreparedPerItemResults<G>;
}

/** The one place a batch's positions are read: results are handed back per kind, beside their items. */
async function runPerItem<S, R>(
  groups: Record<string, PerItem<unknown, S>>,
  run: (statements: S[]) => Promise<R[]>,
): Promise<Record<string, { item: unknown; result: R }[]>> {
  const names = Object.keys(groups);
  const ordered = names.flatMap((name) => groups[name]!.items.map((item) => groups[name]!.statementFor(item)));
  const results = ordered.length === 0 ? [] : await run(ordered);
  let position = 0;
  return Object.fromEntries(
    names.map((name) => [name, groups[name]!.items.map((item) => ({ item, result: results[position++]! }))]),
  );
}
