import { fillPlaceholders, type Query, type SQL, sql } from "drizzle-orm";
import { SQLiteAsyncDialect } from "drizzle-orm/sqlite-core";
import { type Database, database } from "./client";

/**
 * Drizzle-built statements as raw D1 statements, for batches that mix in statements Drizzle did not build (a
 * handler's own) or that run once per item: built by Drizzle, bound and run by D1 (`batchPreparedPerItem` in
 * ./batch.ts reads their results by name).
 */

const dialect = new SQLiteAsyncDialect();

type Buildable = SQL | { toSQL(): Query };

function build(query: Buildable): Query {
  return "toSQL" in query ? query.toSQL() : dialect.sqlToQuery(query);
}

/** A query Drizzle built (or an `sql` fragment) as one D1 statement, bound to its parameters. */
export function prepare(d1: D1Database, query: Buildable): D1PreparedStatement {
  const built = build(query);
  return d1.prepare(built.sql).bind(...built.params);
}

/**
 * A statement Drizzle builds once per isolate, with a `sql.placeholder(name)` for every value that varies, bound per
 * use: building is most of a statement's CPU, and a consumer slice building its commit anew for each of its receipts
 * was the longest stretch the Worker's one thread was busy (bench/results/2026-12-02-dd8329b-tail-profile.json). The SQL text does
 * not depend on the D1 binding, so one build serves every binding. The relay's receipt insert is one too
 * (src/relay/relay.ts).
 *
 * @example
 * const freeLease = statementTemplate((db) =>
 *   db.update(receipts).set({ leaseUntil: null }).where(eq(receipts.receiptId, placeholder("receiptId"))),
 * );
 * await d1.batch([freeLease(d1, { receiptId })]);
 */
export function statementTemplate(
  builder: (db: Database) => Buildable,
): (d1: D1Database, values: Record<string, unknown>) => D1PreparedStatement {
  let built: Query | undefined;
  return (d1, values) => {
    built ??= build(builder(database({ DB: d1 })));
    // A value missing from `values` throws here, before anything is sent.
    return d1.prepare(built.sql).bind(...fillPlaceholders(built.params, values));
  };
}

/** A value a template leaves open, named: bound per use (`statementTemplate`). SQL, so any column's setter takes it. */
export function placeholder(name: string): SQL {
  return sql`${sql.placeholder(name)}`;
}
