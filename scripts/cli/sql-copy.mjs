// The local SQLite `cli sql` runs a query in: the project's own schema (migrations/*.sql, as wrangler applies them),
// empty until the receipt tables the query reads are copied in. SQLite itself says what the query is: whether the
// text is one statement (the prepared statement's own text is all of it), whether it writes (it fails under
// `PRAGMA query_only`), and which tables and columns it reads (the program EXPLAIN prints). Nothing here parses SQL.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { CliError, EXIT } from "./errors.mjs";

const MIGRATIONS = join(import.meta.dirname, "..", "..", "migrations");
/** SQLite's result code for a write a read-only connection refused. */
const SQLITE_READONLY = 8;

/** node:sqlite, or a setup error saying how to get it: it is behind a flag before Node 22.13. */
async function nodeSqlite() {
  try {
    return await import("node:sqlite");
  } catch (error) {
    if (/** @type {{ code?: string }} */ (error)?.code !== "ERR_UNKNOWN_BUILTIN_MODULE") throw error;
    throw new CliError(
      `cli sql runs the query in node:sqlite, which Node ${process.versions.node} has only behind a flag: run it with NODE_OPTIONS=--experimental-sqlite, or use Node 22.13 or later`,
      EXIT.setup,
    );
  }
}

/**
 * An in-memory database with the receipt schema and no rows. Triggers are dropped: they stamp D1's own times on
 * writes, and the copy's rows arrive with those times already set.
 */
export async function emptyCopy() {
  const { DatabaseSync } = await nodeSqlite();
  const copy = new DatabaseSync(":memory:");
  for (const file of readdirSync(MIGRATIONS)
    .filter((name) => name.endsWith(".sql"))
    .sort())
    copy.exec(readFileSync(join(MIGRATIONS, file), "utf8"));
  const triggers = copy.prepare("SELECT name FROM sqlite_schema WHERE type = 'trigger'").all();
  for (const { name } of triggers) copy.exec(`DROP TRIGGER ${quoteName(String(name))}`);
  return copy;
}

/**
 * What one query needs, checked on the empty copy before any row is fetched: the tables it reads, and of those
 * the ones whose `body` it reads. Throws a usage error for text that is not exactly one statement, does not
 * compile, or writes.
 * @param {import("node:sqlite").DatabaseSync} copy
 * @param {string} text
 * @returns {{ tables: Set<string>, bodies: Set<string> }}
 */
export function analyse(copy, text) {
  const statement = firstStatement(copy, text);
  if (statement === null) throw new CliError("the query is empty: give one SQL statement", EXIT.usage);
  const rest = text.slice(statement.sourceSQL.length);
  if (!text.startsWith(statement.sourceSQL) || holdsStatement(copy, rest))
    throw new CliError(
      "cli sql runs one statement at a time, and this text holds more than one: run them one by one",
      EXIT.usage,
    );
  runReadOnly(copy, statement, (found) => found.get());
  return readsOf(copy, statement.sourceSQL);
}

/**
 * Runs the query on the copy, read-only: its rows as objects keyed by column name, as D1 answers them.
 * @param {import("node:sqlite").DatabaseSync} copy
 * @param {string} text
 */
export function runQuery(copy, text) {
  const statement = firstStatement(copy, text);
  if (statement === null) throw new CliError("the query is empty: give one SQL statement", EXIT.usage);
  return /** @type {Record<string, unknown>[]} */ (runReadOnly(copy, statement, (found) => found.all()));
}

/**
 * Copies rows into a table of the copy, by column name.
 * @param {import("node:sqlite").DatabaseSync} copy
 * @param {string} table
 * @param {{ columns: string[], base64Columns: string[], rows: unknown[][] }} page
 */
export function loadRows(copy, table, page) {
  const names = page.columns.map(quoteName).join(", ");
  const insert = copy.prepare(
    `INSERT INTO ${quoteName(table)} (${names}) VALUES (${page.columns.map(() => "?").join(", ")})`,
  );
  const blobs = page.columns.map((column) => page.base64Columns.includes(column));
  copy.exec("BEGIN");
  try {
    for (const row of page.rows)
      insert.run(
        ...row.map((value, index) =>
          blobs[index] && typeof value === "string" ? Buffer.from(value, "base64") : /** @type {any} */ (value),
        ),
      );
    copy.exec("COMMIT");
  } catch (error) {
    copy.exec("ROLLBACK");
    throw new CliError(
      `the receiver's ${table} rows do not fit this checkout's schema (${/** @type {Error} */ (error).message}): run cli sql from the checkout the receiver was deployed from`,
      EXIT.failed,
    );
  }
}

/**
 * The statement the text starts with, or null when it holds none (only blanks and comments). A text SQLite cannot
 * compile throws its error as a usage error.
 * @param {import("node:sqlite").DatabaseSync} copy
 * @param {string} text
 */
function firstStatement(copy, text) {
  try {
    const statement = copy.prepare(text);
    // Node 22 prepares text without a statement and fails on the first use; Node 24 refuses it at once.
    void statement.sourceSQL;
    return statement;
  } catch (error) {
    if (/** @type {{ code?: string }} */ (error)?.code !== "ERR_SQLITE_ERROR") return null;
    throw new CliError(`the query does not compile: ${/** @type {Error} */ (error).message}`, EXIT.usage);
  }
}

/** Whether what follows the first statement holds another one (or anything SQLite cannot read as blank). */
function holdsStatement(/** @type {import("node:sqlite").DatabaseSync} */ copy, /** @type {string} */ rest) {
  try {
    return firstStatement(copy, rest) !== null;
  } catch {
    return true;
  }
}

/**
 * Runs `use` on the statement with the connection refusing every write, so a statement that would change
 * anything fails with SQLite's read-only error, turned into a usage error.
 * @template T
 * @param {import("node:sqlite").DatabaseSync} copy
 * @param {import("node:sqlite").StatementSync} statement
 * @param {(statement: import("node:sqlite").StatementSync) => T} use
 * @returns {T}
 */
function runReadOnly(copy, statement, use) {
  copy.exec("PRAGMA query_only = ON");
  try {
    return use(statement);
  } catch (error) {
    if (/** @type {{ errcode?: number }} */ (error)?.errcode === SQLITE_READONLY)
      throw new CliError(
        "cli sql runs read-only statements (SELECT, WITH … SELECT): this one would write, and is refused",
        EXIT.usage,
      );
    throw new CliError(`the query failed: ${/** @type {Error} */ (error).message}`, EXIT.failed);
  } finally {
    copy.exec("PRAGMA query_only = OFF");
  }
}

/**
 * The tables the compiled statement opens for reading, and those of them whose `body` column it reads: from its
 * program (EXPLAIN), whose OpenRead names a b-tree by root page and whose Column reads a cursor's field by its
 * place in the record. A statement that is itself an EXPLAIN cannot be explained again, and reads no table.
 * @param {import("node:sqlite").DatabaseSync} copy
 * @param {string} statementText
 */
function readsOf(copy, statementText) {
  /** @type {Set<string>} */
  const tables = new Set();
  /** @type {Set<string>} */
  const bodies = new Set();
  let program;
  try {
    program = copy.prepare(`EXPLAIN ${statementText}`).all();
  } catch {
    return { tables, bodies };
  }
  const btrees = new Map(
    copy
      .prepare("SELECT rootpage, type, tbl_name FROM sqlite_schema WHERE rootpage > 0")
      .all()
      .map((row) => [Number(row.rootpage), { type: String(row.type), table: String(row.tbl_name) }]),
  );
  /** @type {Map<number, { type: string, table: string }>} */
  const cursors = new Map();
  for (const step of program) {
    // p3 is the schema: 0 the main one (1 is temp, whose tables the statement would have made itself).
    if ((step.opcode === "OpenRead" || step.opcode === "ReopenIdx") && step.p3 === 0) {
      const btree = btrees.get(Number(step.p2));
      if (btree) {
        cursors.set(Number(step.p1), btree);
        tables.add(btree.table);
      }
    }
  }
  for (const step of program) {
    const btree = step.opcode === "Column" ? cursors.get(Number(step.p1)) : undefined;
    if (btree?.type === "table" && recordPlace(copy, btree.table, "body") === Number(step.p2)) bodies.add(btree.table);
  }
  return { tables, bodies };
}

/**
 * Where a column sits in its table's records: its place among the columns for a rowid table; for a WITHOUT ROWID
 * table the primary key's columns come first, then the others in order (SQLite's record format). -1 when absent.
 * @param {import("node:sqlite").DatabaseSync} copy
 * @param {string} table
 * @param {string} column
 */
function recordPlace(copy, table, column) {
  const columns = copy.prepare("SELECT name, pk FROM pragma_table_xinfo(?) ORDER BY cid").all(table);
  const listed = copy.prepare("SELECT wr FROM pragma_table_list WHERE schema = 'main' AND name = ?").get(table);
  const order = listed?.wr
    ? [
        ...columns.filter((entry) => Number(entry.pk) > 0).sort((a, b) => Number(a.pk) - Number(b.pk)),
        ...columns.filter((entry) => Number(entry.pk) === 0),
      ]
    : columns;
  return order.findIndex((entry) => entry.name === column);
}

/** An SQL identifier, quoted. */
function quoteName(/** @type {string} */ name) {
  return `"${name.replaceAll('"', '""')}"`;
}
