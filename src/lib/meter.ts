import { failDuringLocalOutage } from "./local-faults";
import { type MeterReading, type MeterTotals, ZERO_TOTALS } from "./meter-totals";

export { difference, type MeterReading, type MeterTotals, sumReadings, ZERO_TOTALS } from "./meter-totals";

/**
 * Billed units, counted where they happen from the runtime's own meters: D1's `meta.rows_read` /
 * `meta.rows_written`, Durable Object SQLite cursors' `rowsRead` / `rowsWritten`, and the calls Cloudflare bills
 * per unit (D1 calls, Durable Object requests, alarm writes, queue operations). Production code goes through
 * these helpers anyway, so the counts cost a few integer additions and nothing is rebuilt in the bench.
 *
 * Totals live per isolate. A reading carries the isolate's id, so a collector that asks the Worker and every
 * shard (which may or may not share an isolate) can add each isolate exactly once.
 *
 * @example
 * const db = meteredD1(env.DB); // every statement and batch through `db` is counted
 * const before = meterReading();
 */

/** Minted on first read: Workers refuse random values at module load. */
let isolateId: string | null = null;
const totals: MeterTotals = { ...ZERO_TOTALS };

export function meterReading(): MeterReading {
  isolateId ??= crypto.randomUUID();
  return { isolateId, totals: { ...totals } };
}

export function count(meter: keyof MeterTotals, amount = 1): void {
  totals[meter] += amount;
}

/** A queue message is billed per 64 KB for each of its write, read and delete. */
export const QUEUE_BILLING_CHUNK_BYTES = 64 * 1024;

export function queueUnits(message: unknown): number {
  const bytes = new TextEncoder().encode(JSON.stringify(message)).byteLength;
  return Math.max(1, Math.ceil(bytes / QUEUE_BILLING_CHUNK_BYTES));
}

/** One Durable Object SQLite statement, run to completion and counted. */
export function execCounted<Row extends Record<string, SqlStorageValue>>(
  sql: SqlStorage,
  query: string,
  ...bindings: unknown[]
): Row[] {
  const cursor = sql.exec<Row>(query, ...bindings);
  const rows = cursor.toArray();
  countCursor(cursor);
  return rows;
}

/** For a cursor read lazily: call once the rows that will be read have been. */
export function countCursor(cursor: { rowsRead: number; rowsWritten: number }): void {
  totals.doRowsRead += cursor.rowsRead;
  totals.doRowsWritten += cursor.rowsWritten;
}

function countD1(results: D1Result | readonly D1Result[]): void {
  totals.d1Calls += 1;
  for (const result of Array.isArray(results) ? results : [results]) {
    totals.d1RowsRead += result.meta?.rows_read ?? 0;
    totals.d1RowsWritten += result.meta?.rows_written ?? 0;
    totals.d1DurationMs += result.meta?.duration ?? 0;
  }
}

/**
 * A D1 binding whose every call is counted. Drizzle and hand-built statements both go through it; statements
 * it prepares can be mixed freely in its `batch`.
 */
export function meteredD1(inner: D1Database): D1Database {
  if (inner instanceof MeteredD1) return inner;
  return new MeteredD1(inner);
}

class MeteredD1 {
  constructor(readonly inner: D1Database) {}

  prepare(query: string): D1PreparedStatement {
    return new MeteredStatement(this.inner.prepare(query)) as unknown as D1PreparedStatement;
  }

  async batch<T = unknown>(statements: D1PreparedStatement[]): Promise<D1Result<T>[]> {
    failDuringLocalOutage("d1");
    const results = await this.inner.batch<T>(statements.map(unwrap));
    countD1(results);
    return results;
  }

  async exec(query: string): Promise<D1ExecResult> {
    failDuringLocalOutage("d1");
    totals.d1Calls += 1;
    return this.inner.exec(query);
  }

  withSession(constraintOrBookmark?: string): D1DatabaseSession {
    return this.inner.withSession(constraintOrBookmark);
  }

  dump(): Promise<ArrayBuffer> {
    return this.inner.dump();
  }
}

class MeteredStatement {
  constructor(readonly inner: D1PreparedStatement) {}

  bind(...values: unknown[]): MeteredStatement {
    return new MeteredStatement(this.inner.bind(...values));
  }

  async run<T = Record<string, unknown>>(): Promise<D1Result<T>> {
    failDuringLocalOutage("d1");
    const result = await this.inner.run<T>();
    countD1(result);
    return result;
  }

  async all<T = Record<string, unknown>>(): Promise<D1Result<T>> {
    failDuringLocalOutage("d1");
    const result = await this.inner.all<T>();
    countD1(result);
    return result;
  }

  async first<T = Record<string, unknown>>(column?: string): Promise<T | null> {
    const { results } = await this.all<Record<string, unknown>>();
    const row = results[0];
    if (row === undefined) return null;
    return (column === undefined ? row : row[column]) as T;
  }

  /**
   * D1's raw() carries no meta, so rows come from all() and are laid out as arrays in column order, the same
   * mapping Drizzle applies to batch results.
   */
  async raw<T = unknown[]>(options?: { columnNames?: boolean }): Promise<T[]> {
    const { results } = await this.all<Record<string, unknown>>();
    const rows = results.map((row) => Object.values(row)) as T[];
    if (options?.columnNames) return [Object.keys(results[0] ?? {}) as T, ...rows];
    return rows;
  }
}

function unwrap(statement: D1PreparedStatement): D1PreparedStatement {
  return statement instanceof MeteredStatement ? statement.inner : statement;
}
