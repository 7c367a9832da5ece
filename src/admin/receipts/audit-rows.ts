import { and, asc, eq, getTableColumns, gte, inArray, lt, type SQL, sql } from "drizzle-orm";
import type { SQLiteColumn, SQLiteTable } from "drizzle-orm/sqlite-core";
import { encodeBase64 } from "../../crypto/encoding";
import { type Database, database } from "../../db/client";
import { attempts, deliveries, quarantine, receipts, replays } from "../../db/schema";
import { ulidFloor } from "../../lib/ulid";
import { envForDatabase } from "../../sources/databases";
import type { AuditTableName } from "./audit-table-names";

/**
 * The rows of the receipt tables, as they are, for `npm run cli -- sql` (scripts/cli/commands/sql.mjs): the CLI
 * copies the tables a query reads from every receipt database into one local SQLite and runs the query there once,
 * so aggregates, joins, ORDER BY and LIMIT see every database's rows as one database would hold them. Only the
 * tables of receipts travel: system tables (alerts, cron runs) are in `DB` alone, and handshake secrets never leave.
 */

interface AuditTable {
  table: SQLiteTable;
  /** The primary key, in order: the pages' keyset. */
  key: SQLiteColumn[];
  /** The receipt id the row belongs to: its time (a ULID) selects the rows of --since/--until. */
  receiptId: SQLiteColumn;
  /** The row's own source column; rows without one belong to their receipt's source. */
  source?: SQLiteColumn;
  /** A body blob column, sent only when asked for (base64). */
  body?: SQLiteColumn;
}

export const AUDIT_TABLES = {
  receipts: {
    table: receipts,
    key: [receipts.receiptId],
    receiptId: receipts.receiptId,
    source: receipts.source,
    body: receipts.body,
  },
  deliveries: {
    table: deliveries,
    key: [deliveries.receiptId, deliveries.route],
    receiptId: deliveries.receiptId,
  },
  attempts: {
    table: attempts,
    key: [attempts.receiptId, attempts.attemptNumber],
    receiptId: attempts.receiptId,
  },
  replays: {
    table: replays,
    key: [replays.receiptId, replays.replayNumber],
    receiptId: replays.receiptId,
  },
  // A quarantine id is minted as a receipt id is, from the time the copy arrived (src/claims/quarantine.ts).
  quarantine: {
    table: quarantine,
    key: [quarantine.quarantineId],
    receiptId: quarantine.quarantineId,
    source: quarantine.source,
    body: quarantine.body,
  },
} satisfies Record<AuditTableName, AuditTable>;

/** Which rows: of one source, of receipts received in [since, until) (epoch ms), bodies or not. */
export interface AuditRowFilter {
  source?: string;
  since?: number;
  until?: number;
  bodies: boolean;
}

/** A primary key's values, in the key's order. */
export type RowKey = (string | number)[];

export interface AuditRowsPage {
  /** SQL column names, in the order of each row's values. */
  columns: string[];
  rows: unknown[][];
  /** The columns whose values are blobs sent as base64 (a body, when asked for). */
  base64Columns: string[];
  /** The key of the last row when the database may hold more, else null. */
  lastKey: RowKey | null;
}

/** The SQL columns a page carries: every column of the table, the body only when asked for. */
export function auditColumns(name: AuditTableName, bodies: boolean): SQLiteColumn[] {
  const spec: AuditTable = AUDIT_TABLES[name];
  return Object.values(getTableColumns(spec.table) as Record<string, SQLiteColumn>).filter(
    (column) => bodies || column !== spec.body,
  );
}

/** Up to `limit` rows of one table in one receipt database after `after` (a key of the previous page), in key order. */
export async function auditRowsPage(
  env: Env,
  binding: string,
  name: AuditTableName,
  filter: AuditRowFilter,
  after: RowKey | null,
  limit: number,
): Promise<AuditRowsPage> {
  const spec: AuditTable = AUDIT_TABLES[name];
  const columns = auditColumns(name, filter.bodies);
  const selection = Object.fromEntries(columns.map((column, index) => [`c${index}`, column]));
  const db = database(envForDatabase(env, binding));
  const found = (await db
    .select(selection)
    .from(spec.table)
    .where(and(...conditions(db, spec, filter, after)))
    .orderBy(...spec.key.map((column) => asc(column)))
    .limit(limit + 1)) as Record<string, unknown>[];
  const more = found.length > limit;
  const rows = found.slice(0, limit).map((row) => columns.map((_column, index) => wireValue(row[`c${index}`])));
  const keyIndexes = spec.key.map((column) => columns.indexOf(column));
  const last = rows.at(-1);
  return {
    columns: columns.map((column) => column.name),
    rows,
    base64Columns: columns.filter((column) => column === spec.body).map((column) => column.name),
    lastKey: more && last ? keyIndexes.map((index) => last[index] as string | number) : null,
  };
}

function conditions(db: Database, spec: AuditTable, filter: AuditRowFilter, after: RowKey | null): (SQL | undefined)[] {
  const { source, since, until } = filter;
  const ofSource =
    source === undefined
      ? undefined
      : spec.source
        ? eq(spec.source, source)
        : inArray(
            spec.receiptId,
            db.select({ receiptId: receipts.receiptId }).from(receipts).where(eq(receipts.source, source)),
          );
  return [
    ofSource,
    since === undefined ? undefined : gte(spec.receiptId, ulidFloor(since)),
    until === undefined ? undefined : lt(spec.receiptId, ulidFloor(until)),
    after === null ? undefined : keyAfter(spec.key, after),
  ];
}

/** `(k1, k2) > (v1, v2)`: SQLite compares row values in order, as the pages are sorted. */
function keyAfter(key: SQLiteColumn[], after: RowKey): SQL {
  const columns = sql.join(key, sql`, `);
  const values = sql.join(
    after.map((value) => sql`${value}`),
    sql`, `,
  );
  return sql`(${columns}) > (${values})`;
}

/** A value as JSON carries it: a blob (D1 hands one back as bytes or an array of them) as base64. */
function wireValue(value: unknown): unknown {
  if (value instanceof Uint8Array) return encodeBase64(value);
  if (value instanceof ArrayBuffer) return encodeBase64(new Uint8Array(value));
  if (Array.isArray(value)) return encodeBase64(Uint8Array.from(value as number[]));
  return value;
}
