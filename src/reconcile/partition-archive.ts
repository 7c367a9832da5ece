import { encodeBase64 } from "../crypto/encoding";
import { count } from "../lib/meter";

/**
 * The archive of a partition database before it is emptied (partition-drop.ts): every row of every table, as
 * NDJSON in R2, one object per page, under one prefix per database and period:
 *
 *   archive/<binding>/<period start ISO>/<page, 6 digits>.ndjson
 *
 * One JSON object per line: `table` names the table, every other field is a column under its own name; a BLOB
 * (a body kept in D1) is its bytes in base64. DuckDB reads a whole partition with
 * `read_json_auto('archive/DB_P0/2026-12-01T00:00:00.000Z/*.ndjson')` (docs/operating.md).
 *
 * One object per page rather than a multipart upload: a multipart upload needs every part but the last to be at
 * least 5 MiB and of one size, which pages of rows are not, and an object per page is written whole or not at all,
 * so a run that dies between a page's write and its checkpoint only writes that page again, under the same key.
 */

/** Rows per page (and per R2 object): a page of rows with 1 MB bodies stays far below a Worker's memory. */
export const ARCHIVE_PAGE_ROWS = 200;

/** Where an archive page is read from next: the table (by its index in `tables`) and the key of the last row read. */
export interface ArchivePosition {
  /** The tables being archived, fixed when the archive starts, in name order. */
  tables: string[];
  tableIndex: number;
  /** The key (primary-key columns, or rowid) of the last row archived in this table; null before its first. */
  after: unknown[] | null;
  /** The next page's number, so its object key. */
  page: number;
  /** Rows archived so far. */
  rows: number;
  /** Rows archived so far by table: what the drop checks the database still holds (partition-guard.ts). */
  tableRows?: Record<string, number>;
}

/** The tables of a receipt database: every table but SQLite's, D1's own and the migrations' record. */
export async function receiptTablesOf(d1: D1Database): Promise<string[]> {
  const { results } = await d1
    .prepare(
      `SELECT name FROM sqlite_master WHERE type = 'table' AND name <> 'd1_migrations'
       AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' AND name NOT LIKE '\\_cf\\_%' ESCAPE '\\' ORDER BY name`,
    )
    .all<{ name: string }>();
  return results.map((row) => row.name);
}

/** The prefix under which a database's archive of one period is written. */
export function archivePrefix(binding: string, periodStart: number): string {
  return `archive/${binding}/${new Date(periodStart).toISOString()}/`;
}

/**
 * Archives one page of the table at `position` and says where the next one starts; null when every table is
 * archived. A table's rows are read in its primary key's order (rowid for a table without one), from after the
 * last key archived, so each page is one index range and a repeated page is the same rows.
 */
export async function archivePage(
  d1: D1Database,
  bucket: R2Bucket,
  prefix: string,
  position: ArchivePosition,
): Promise<ArchivePosition | null> {
  const table = position.tables[position.tableIndex];
  if (table === undefined) return null;
  const keyColumns = await keyColumnsOf(d1, table);
  const keyList = keyColumns.map(quoted).join(", ");
  const keyAliases = keyColumns.map((_, index) => `${quoted(keyColumns[index]!)} AS "__key${index}"`).join(", ");
  const after = position.after === null ? "" : `WHERE (${keyList}) > (${keyColumns.map(() => "?").join(", ")})`;
  const { results } = await d1
    .prepare(`SELECT ${keyAliases}, * FROM ${quoted(table)} ${after} ORDER BY ${keyList} LIMIT ${ARCHIVE_PAGE_ROWS}`)
    .bind(...(position.after ?? []))
    .all<Record<string, unknown>>();
  if (results.length === 0) {
    return { ...position, tableIndex: position.tableIndex + 1, after: null };
  }
  const lines = results.map((row) => JSON.stringify({ table, ...archivedColumns(row) }));
  await bucket.put(`${prefix}${String(position.page).padStart(6, "0")}.ndjson`, `${lines.join("\n")}\n`, {
    httpMetadata: { contentType: "application/x-ndjson" },
  });
  count("r2ClassA");
  const last = results.at(-1)!;
  return {
    ...position,
    after: keyColumns.map((_, index) => last[`__key${index}`]),
    page: position.page + 1,
    rows: position.rows + results.length,
    tableRows: { ...position.tableRows, [table]: (position.tableRows?.[table] ?? 0) + results.length },
  };
}

/** A table's primary-key columns in key order, or rowid for a table that has none of its own. */
async function keyColumnsOf(d1: D1Database, table: string): Promise<string[]> {
  const { results } = await d1.prepare(`PRAGMA table_info(${quoted(table)})`).all<{ name: string; pk: number }>();
  const key = results.filter((column) => column.pk > 0).sort((a, b) => a.pk - b.pk);
  return key.length > 0 ? key.map((column) => column.name) : ["rowid"];
}

/** A row as archived: the page's own key columns left out, BLOBs as base64. */
function archivedColumns(row: Record<string, unknown>): Record<string, unknown> {
  const columns: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(row)) {
    if (name.startsWith("__key")) continue;
    const bytes = blobBytes(value);
    columns[name] = bytes ? encodeBase64(bytes) : value;
  }
  return columns;
}

/** The bytes of a BLOB as D1 hands it back (an array of byte values, or a buffer); null for any other value. */
function blobBytes(value: unknown): Uint8Array | null {
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  if (value instanceof Uint8Array) return value;
  if (Array.isArray(value) && value.every((byte) => typeof byte === "number")) return Uint8Array.from(value);
  return null;
}

/** An SQL identifier, quoted (table names come from sqlite_master, never from a request). */
export function quoted(identifier: string): string {
  return `"${identifier.replaceAll('"', '""')}"`;
}
