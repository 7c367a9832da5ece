// `sql "<query>" [--source S] [--since T] [--until T] [--json]`: one SQL statement over every receipt database,
// with the rows one database holding them all would give. The receipts live in several D1 databases (each source's
// own, a moved source's old one, time partitions), and a query run in each and concatenated would get aggregates,
// GROUP BY, ORDER BY, LIMIT and joins wrong. So the tables the query reads are copied, from every receipt database,
// into one local SQLite with the project's schema (../sql-copy.mjs), and the query runs there once.
import { CliError, EXIT } from "../errors.mjs";
import { printable } from "../format.mjs";
import { adminRequest } from "../http.mjs";
import { analyse, emptyCopy, loadRows, runQuery } from "../sql-copy.mjs";
import { importWorkerCode } from "../worker-code.mjs";

/** The most rows copied unless --max-rows says otherwise: past it, narrowing the range is the answer. */
const DEFAULT_MAX_ROWS = 200_000;
/** The widest a table cell is printed; --json prints every value whole. */
const CELL_WIDTH = 60;

/**
 * @param {string} query
 * @param {{ source?: string, since?: string, until?: string, json?: boolean, maxRows?: string } & import("../project.mjs").ProjectOptions} options
 */
export async function sql(query, options) {
  const maxRows = Number(options.maxRows ?? DEFAULT_MAX_ROWS);
  if (!Number.isInteger(maxRows) || maxRows < 1)
    throw new CliError(`--max-rows ${options.maxRows}: use a whole number of rows, 1 or more`, EXIT.usage);
  const worker = await importWorkerCode(
    'export { AUDIT_TABLE_NAMES } from "./src/admin/receipts/audit-table-names.ts"; export { parseDuration } from "./src/lib/duration.ts";',
  );
  const copy = await emptyCopy();
  const { tables, bodies } = analyse(copy, query);
  const notCopied = [...tables].filter((table) => !worker.AUDIT_TABLE_NAMES.includes(table) && !isInternal(table));
  if (notCopied.length > 0)
    throw new CliError(
      `cli sql reads the receipt tables (${worker.AUDIT_TABLE_NAMES.join(", ")}), not ${notCopied.join(", ")}: query ${notCopied.length === 1 ? "that table" : "those tables"} in DB with npx wrangler d1 execute`,
      EXIT.usage,
    );
  const now = Date.now();
  const range = {
    source: options.source,
    since: instant(options.since, now, worker.parseDuration),
    until: instant(options.until, now, worker.parseDuration),
  };
  let copied = 0;
  for (const table of tables) {
    if (isInternal(table)) continue;
    let after;
    do {
      const parameters = new URLSearchParams({ table, ...(bodies.has(table) ? { bodies: "true" } : {}) });
      for (const [name, value] of Object.entries({ ...range, after }))
        if (value !== undefined) parameters.set(name, value);
      /** @type {{ columns: string[], base64Columns: string[], rows: unknown[][], nextCursor: string | null }} */
      const page = await adminRequest(options, `/audit/rows?${parameters}`);
      copied += page.rows.length;
      if (copied > maxRows)
        throw new CliError(
          `the query reads more than ${maxRows} rows of the receipt tables: narrow it with --since/--until or --source (or raise --max-rows)`,
          EXIT.failed,
        );
      loadRows(copy, table, page);
      after = page.nextCursor ?? undefined;
    } while (after !== undefined);
  }
  const rows = runQuery(copy, query);
  copy.close();
  if (options.json) console.log(JSON.stringify(rows.map(jsonRow)));
  else
    console.log(
      rows.length === 0 ? "(no rows)" : `${asTable(rows)}\n(${rows.length} row${rows.length === 1 ? "" : "s"})`,
    );
  return 0;
}

/** SQLite's own tables (the schema): the copy has them as the receipt databases do. */
const isInternal = (/** @type {string} */ table) => table.startsWith("sqlite_");

/**
 * --since/--until: a duration back from now ("24h", "7d", read as the Worker reads a duration setting), else an
 * ISO 8601 date or epoch milliseconds, which the admin API checks. A duration is turned into an instant once, so
 * every page and table of one run covers the same range.
 * @param {string | undefined} value
 * @param {number} now
 * @param {(value: unknown) => number | null} parseDuration
 */
function instant(value, now, parseDuration) {
  if (value === undefined) return undefined;
  const back = parseDuration(value);
  return back === null ? value : String(now - back);
}

/** A row for --json: a blob as base64 (the rest is what JSON carries as it is). */
function jsonRow(/** @type {Record<string, unknown>} */ row) {
  return Object.fromEntries(
    Object.entries(row).map(([name, value]) => [
      name,
      value instanceof Uint8Array ? Buffer.from(value).toString("base64") : value,
    ]),
  );
}

/** The rows as a table: a header, a rule, a line a row; numbers to the right, long values cut to CELL_WIDTH. */
function asTable(/** @type {Record<string, unknown>[]} */ rows) {
  const names = Object.keys(rows[0] ?? {});
  const cells = rows.map((row) => names.map((name) => cell(row[name])));
  const widths = names.map((name, index) =>
    Math.max(printable(name).length, ...cells.map((line) => line[index].length)),
  );
  const numeric = names.map((name) => rows.every((row) => typeof row[name] === "number" || row[name] === null));
  const line = (/** @type {string[]} */ values) =>
    values
      .map((value, index) => (numeric[index] ? value.padStart(widths[index]) : value.padEnd(widths[index])))
      .join("  ")
      .trimEnd();
  return [
    line(names.map((name) => printable(name))),
    line(widths.map((width) => "-".repeat(width))),
    ...cells.map(line),
  ].join("\n");
}

function cell(/** @type {unknown} */ value) {
  if (value === null || value === undefined) return "NULL";
  if (value instanceof Uint8Array) return `<${value.length}-byte blob>`;
  const text = printable(value);
  return text.length > CELL_WIDTH ? `${text.slice(0, CELL_WIDTH - 1)}…` : text;
}
