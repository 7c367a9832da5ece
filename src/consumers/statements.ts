import { fillPlaceholders, type Query, type SQL, sql } from "drizzle-orm";
import { SQLiteAsyncDialect } from "drizzle-orm/sqlite-core";
import { type Database, database } from "../db/client";
import { batchAborts } from "../db/schema";
import { count } from "../lib/meter";

/** The raw D1 statements a consumer commit is built of (commit.ts for receipts, delivery-commit.ts for further deliveries). */

const dialect = new SQLiteAsyncDialect();

type Buildable = SQL | { toSQL(): Query };

function build(query: Buildable): Query {
  return "toSQL" in query ? query.toSQL() : dialect.sqlToQuery(query);
}

export function prepare(d1: D1Database, query: Buildable): D1PreparedStatement {
  const built = build(query);
  return d1.prepare(built.sql).bind(...built.params);
}

/**
 * A statement Drizzle builds once per isolate, with a `sql.placeholder(name)` for every value that varies, bound per
 * use: building is most of a statement's CPU, and a consumer slice building its commit anew for each of its receipts
 * was the longest stretch the Worker's one thread was busy (docs/performance.md, "(b)'s tail"). The SQL text does
 * not depend on the D1 binding, so one build serves every binding. The raw-statement counterpart of the relay's
 * `StatementTemplate` (src/db/batch.ts), for batches that mix in a handler's own D1 statements.
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

const abortUnlessChangedStatement = statementTemplate(
  () => sql`INSERT INTO ${batchAborts} (reason) SELECT NULL WHERE changes() = 0`,
);

/** Aborts the batch it stands in when the statement before it changed no row (it inserts NULL into a NOT NULL column). */
export function abortUnlessChanged(d1: D1Database): D1PreparedStatement {
  return abortUnlessChangedStatement(d1, {});
}

/** The statements a handler planned (its effect and version gate), as opposed to the receiver's own. */
export const handlerStatements = new WeakSet<D1PreparedStatement>();

/**
 * D1 refuses an empty batch; an attempt that records nothing (lease taken elsewhere) makes none. The rows the
 * handlers' own statements wrote are metered apart from the receiver's, matched to their results by statement.
 */
export async function batchUnlessEmpty(d1: D1Database, statements: D1PreparedStatement[]): Promise<void> {
  if (statements.length === 0) return;
  const results = await d1.batch(statements);
  const handlerRows = statements.reduce(
    (sum, statement, index) =>
      handlerStatements.has(statement) ? sum + (results[index]?.meta.rows_written ?? 0) : sum,
    0,
  );
  count("d1HandlerRowsWritten", handlerRows);
}

/** A handler plan's effect, in commit order: its version gate's claim (guarded), then its statements. */
export function effectStatements(
  d1: D1Database,
  plan: { statements: D1PreparedStatement[]; versionGate?: { claim: D1PreparedStatement } } | null,
): D1PreparedStatement[] {
  if (!plan) return [];
  const gate = plan.versionGate;
  for (const statement of [...(gate ? [gate.claim] : []), ...plan.statements]) handlerStatements.add(statement);
  return [...(gate ? [gate.claim, abortUnlessChanged(d1)] : []), ...plan.statements];
}
