import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { type ReceiptStore, shardFiles } from "./store.ts";

/**
 * Bytes per receipt and per shard tombstone as a database's size says them: a copy of the live SQLite file
 * (`VACUUM INTO`, from a read-only connection, so the runtime is not disturbed) holding only the rows measured,
 * VACUUMed, `page_count × page_size`; minus the same copy with those rows deleted and VACUUMed again; divided by the
 * rows held. Whole pages, indexes and the free room inside pages included, as D1 and Durable Object storage bill.
 */

/** The receiver's per-receipt tables besides `receipts`, each keyed by its receipt. */
const RECEIPT_CHILD_TABLES = ["deliveries", "attempts", "replays"];

export interface VacuumedBytes {
  /** Rows measured: receipts (D1) or tombstones (shards). */
  rows: number;
  /** VACUUMed bytes holding them, and holding none of them. */
  bytes: number;
  emptyBytes: number;
  perRow: number;
  /** D1 only: the mean stored body of the receipts measured (0 once dropped or kept elsewhere). */
  meanBodyBytes?: number;
}

function vacuumedSize(database: DatabaseSync): number {
  database.exec("VACUUM");
  const pragma = (name: string) => (database.prepare(`PRAGMA ${name}`).get() as Record<string, number>)[name]!;
  return pragma("page_count") * pragma("page_size");
}

/** A scratch copy of `file`, opened for writing, and its removal. */
function scratchCopy(file: string, scratchDir: string, label: string): { database: DatabaseSync; remove(): void } {
  mkdirSync(scratchDir, { recursive: true });
  const copy = join(scratchDir, `${label}.sqlite`);
  rmSync(copy, { force: true });
  const source = new DatabaseSync(file, { readOnly: true });
  try {
    source.exec("PRAGMA busy_timeout = 5000");
    source.prepare("VACUUM INTO ?").run(copy);
  } finally {
    source.close();
  }
  const database = new DatabaseSync(copy);
  database.exec("PRAGMA foreign_keys = OFF");
  return {
    database,
    remove() {
      database.close();
      rmSync(copy, { force: true });
    },
  };
}

/**
 * D1: the receipts whose event keys start with `keyPrefix`, with their deliveries, attempts and replays, over every
 * database that holds some (a partitioned source's are spread over its ring).
 */
export function d1BytesPerReceipt(store: ReceiptStore, keyPrefix: string, scratchDir: string): VacuumedBytes {
  const each = store.databaseFiles().map((file) => d1BytesIn(file, keyPrefix, scratchDir));
  const held = each.filter((measured) => measured.rows > 0);
  const rows = held.reduce((sum, measured) => sum + measured.rows, 0);
  const bytes = held.reduce((sum, measured) => sum + measured.bytes, 0);
  const emptyBytes = held.reduce((sum, measured) => sum + measured.emptyBytes, 0);
  return {
    rows,
    bytes,
    emptyBytes,
    perRow: rows > 0 ? (bytes - emptyBytes) / rows : 0,
    meanBodyBytes:
      rows > 0 ? held.reduce((sum, measured) => sum + measured.meanBodyBytes! * measured.rows, 0) / rows : 0,
  };
}

function d1BytesIn(file: string, keyPrefix: string, scratchDir: string): VacuumedBytes {
  const { database, remove } = scratchCopy(file, scratchDir, "d1");
  try {
    const dropChildren = () => {
      for (const table of RECEIPT_CHILD_TABLES)
        database.exec(`DELETE FROM ${table} WHERE receipt_id NOT IN (SELECT id FROM receipts)`);
    };
    database.prepare("DELETE FROM receipts WHERE event_key NOT LIKE ?").run(`${keyPrefix}%`);
    dropChildren();
    const held = database
      .prepare("SELECT COUNT(*) AS n, COALESCE(AVG(LENGTH(body)), 0) AS body FROM receipts")
      .get() as { n: number; body: number };
    const bytes = vacuumedSize(database);
    database.exec("DELETE FROM receipts");
    dropChildren();
    const emptyBytes = vacuumedSize(database);
    return {
      rows: held.n,
      bytes,
      emptyBytes,
      perRow: held.n > 0 ? (bytes - emptyBytes) / held.n : 0,
      meanBodyBytes: held.body,
    };
  } finally {
    remove();
  }
}

/** The shards: every claim partition's rows (tombstones, once the claims are relayed), all shards together. */
export function shardBytesPerTombstone(persistDir: string, scratchDir: string): VacuumedBytes {
  let rows = 0;
  let bytes = 0;
  let emptyBytes = 0;
  shardFiles(persistDir).forEach((file, index) => {
    const { database, remove } = scratchCopy(file, scratchDir, `shard-${index}`);
    try {
      const partitions = (
        database
          .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'event_claims%'")
          .all() as Array<{ name: string }>
      ).map((row) => row.name);
      for (const name of partitions)
        rows += (database.prepare(`SELECT COUNT(*) AS n FROM "${name}"`).get() as { n: number }).n;
      bytes += vacuumedSize(database);
      for (const name of partitions) database.exec(`DELETE FROM "${name}"`);
      emptyBytes += vacuumedSize(database);
    } finally {
      remove();
    }
  });
  return { rows, bytes, emptyBytes, perRow: rows > 0 ? (bytes - emptyBytes) / rows : 0 };
}

/** Bytes per receipt (80-byte and 3 KB bodies, before and after the body drop) and per tombstone, VACUUMed. */
export function formatVacuumedBytes(bytes: {
  withBody: Record<"small" | "typical", VacuumedBytes>;
  withoutBody: Record<"small" | "typical", VacuumedBytes>;
  tombstone: VacuumedBytes;
}): string {
  const line = (label: string, measured: VacuumedBytes) =>
    `  ${label.padEnd(44)}${measured.perRow.toFixed(0).padStart(6)} bytes  (${measured.rows} rows, ${measured.bytes} − ${measured.emptyBytes} bytes)`;
  return [
    "bytes per row, VACUUMed page_count × page_size, less the same database without the rows:",
    line(`D1 receipt, ${bytes.withBody.small.meanBodyBytes?.toFixed(0)}-byte body`, bytes.withBody.small),
    line("D1 receipt, that body dropped", bytes.withoutBody.small),
    line(`D1 receipt, ${bytes.withBody.typical.meanBodyBytes?.toFixed(0)}-byte body`, bytes.withBody.typical),
    line("D1 receipt, that body dropped", bytes.withoutBody.typical),
    line("shard tombstone", bytes.tombstone),
  ].join("\n");
}
