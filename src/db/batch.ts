import { fillPlaceholders, type Query } from "drizzle-orm";
import type { BatchItem } from "drizzle-orm/batch";
import type { RunnableQuery } from "drizzle-orm/runnable-query";
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
export interface PerItem<I, S extends Statement> {
  readonly items: readonly I[];
  statementFor(item: I): S;
}

export function perItem<I, S extends Statement>(items: readonly I[], statementFor: (item: I) => S): PerItem<I, S> {
  return { items, statementFor };
}

type PerItemResults<G> = {
  [K in keyof G]: G[K] extends PerItem<infer I, infer S> ? { item: I; result: ResultOf<S> }[] : never;
};

/**
 * Runs several kinds of per-item statements as one batch, kind after kind in the order they are written: each
 * kind's results come back under its name, each beside the item it was built from.
 */
export async function batchPerItem<G extends Record<string, PerItem<unknown, Statement>>>(
  db: Database,
  groups: G,
): Promise<PerItemResults<G>> {
  const names = Object.keys(groups) as (keyof G & string)[];
  const ordered = names.flatMap((name) => groups[name]!.items.map((item) => groups[name]!.statementFor(item)));
  const results = ordered.length === 0 ? [] : await db.batch(ordered as [Statement, ...Statement[]]);
  let position = 0;
  return Object.fromEntries(
    names.map((name) => [name, groups[name]!.items.map((item) => ({ item, result: results[position++] }))]),
  ) as PerItemResults<G>;
}

/** What Drizzle's prepared query offers (`.prepare()` on a query builder), as far as a template uses it. */
interface PreparedQuery {
  getQuery(): Query;
  mapResult(response: unknown, isFromBatch?: boolean): unknown;
}

/**
 * A statement Drizzle built once, with a `sql.placeholder(name)` for every value that varies, to be bound per item
 * and run in a batch like any other statement. Building (Drizzle's `sqlToQuery`) is most of a statement's CPU, so a
 * statement run for each of a batch's items is built once per isolate and D1 binding, not once per item
 * (docs/performance.md, "Where the background CPU went").
 */
export class StatementTemplate<R> {
  private readonly query: Query;

  private constructor(private readonly prepared: PreparedQuery) {
    this.query = prepared.getQuery();
  }

  static of<S extends Statement & { prepare(): PreparedQuery }>(statement: S): StatementTemplate<ResultOf<S>> {
    return new StatementTemplate(statement.prepare());
  }

  /** The statement with `values` (by placeholder name; a missing one throws) in its placeholders' places. */
  bind(values: Record<string, unknown>): RunnableQuery<R, "sqlite"> {
    const { prepared } = this;
    const query = { sql: this.query.sql, params: fillPlaceholders(this.query.params, values) };
    // Drizzle's D1 batch (drizzle-orm/d1/session.js, `batch`) asks each item for `_prepare()`, and of what that
    // returns, `getQuery()`, its D1 statement `stmt` to bind the query's params to, and `mapResult` for the result:
    // the prepared query's own, with this item's parameters.
    const bound = {
      getQuery: () => query,
      stmt: (prepared as PreparedQuery & { stmt: D1PreparedStatement }).stmt,
      mapResult: (response: unknown, isFromBatch?: boolean) => prepared.mapResult(response, isFromBatch),
    };
    return { _prepare: () => bound } as unknown as RunnableQuery<R, "sqlite">;
  }
}
