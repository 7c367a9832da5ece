import { sql } from "drizzle-orm";
import { batchAborts } from "../../db/schema";
import { statementTemplate } from "../../db/statement-template";
import { count } from "../../lib/meter";

/** The raw D1 statements a consumer commit is built of (commit.ts for receipts, delivery-commit.ts for further deliveries). */

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
