import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";
import { D1_FILES, d1Directory, localD1Files } from "./runtime.ts";

/**
 * Read-only view of the receiver's local D1 database: the SQLite file workerd keeps under the persist
 * directory. While a runtime runs the bench only ever opens it read-only, so it cannot disturb what it measures
 * (the one write, plan-writes.ts's log, is installed before the runtime starts).
 */
export class ReceiptStore {
  private readonly persistDir: string;

  constructor(persistDir: string) {
    this.persistDir = persistDir;
  }

  /** Every local D1 database of the runtime: `DB` alone, or `DB` and a receipt partition ring's databases. */
  databaseFiles(): string[] {
    const directory = d1Directory(this.persistDir);
    const names = readdirSync(directory).filter((entry) => /^[0-9a-f]{64}\.sqlite$/.test(entry));
    if (names.length === 0) throw new Error(`no D1 database under ${directory}`);
    return names.map((name) => join(directory, name));
  }

  /**
   * `DB`'s file: the system tables, the example domain and every receipt of a source that is not partitioned. With
   * a ring bound beside it, the file applyMigrations saw `DB`'s migrations create (the names are hashes).
   */
  databaseFile(): string {
    const files = this.databaseFiles();
    if (files.length === 1) return files[0]!;
    const name = localD1Files(this.persistDir).DB;
    const file = name ? join(d1Directory(this.persistDir), name) : null;
    if (!file || !files.includes(file))
      throw new Error(`${files.length} local D1 databases and none known as DB (${D1_FILES} under ${this.persistDir})`);
    return file;
  }

  /** Runs `read` on each D1 database in turn (a partitioned source's receipts are spread over several). */
  readEach<T>(read: (database: DatabaseSync) => T): T[] {
    return this.databaseFiles().map((file) => readOnly(file, read));
  }

  /** Runs `read` on each database of a receipt partition ring (every D1 database but `DB`); none without a ring. */
  readPartitions<T>(read: (database: DatabaseSync) => T): T[] {
    const files = this.databaseFiles();
    if (files.length === 1) return [];
    const main = this.databaseFile();
    return files.filter((file) => file !== main).map((file) => readOnly(file, read));
  }

  /** Runs `read` on a fresh read-only connection, so every poll sees the latest committed state. */
  read<T>(read: (database: DatabaseSync) => T): T {
    return readOnly(this.databaseFile(), read);
  }

  /** Receipts of this run's keys by status, whatever source they came through (each phase's key prefix is its own). */
  statusCounts(keyPrefix: string): Map<string, number> {
    return summed(
      this.readEach(
        (database) =>
          database
            .prepare("SELECT status, COUNT(*) AS count FROM receipts WHERE event_key LIKE ? GROUP BY status")
            .all(`${keyPrefix}%`) as Array<{ status: string; count: number }>,
      ),
    );
  }
}

/** `read` on a fresh read-only connection to one SQLite file, closed after. */
function readOnly<T>(file: string, read: (database: DatabaseSync) => T): T {
  const database = new DatabaseSync(file, { readOnly: true });
  try {
    database.exec("PRAGMA busy_timeout = 5000");
    return read(database);
  } finally {
    database.close();
  }
}

/** Counts by status over several databases' rows. */
function summed(perDatabase: Array<Array<{ status: string; count: number }>>): Map<string, number> {
  const counts = new Map<string, number>();
  for (const row of perDatabase.flat()) counts.set(row.status, (counts.get(row.status) ?? 0) + row.count);
  return counts;
}

/**
 * Further routes' deliveries of this run's keys by status (docs/processing.md, "Deliveries"): written with their
 * receipt's first outcome, so once every receipt is finished these say whether every route's work is.
 */
export function deliveryStatusCounts(store: ReceiptStore, keyPrefix: string): Map<string, number> {
  return summed(
    store.readEach(
      (database) =>
        database
          .prepare(
            `SELECT d.status AS status, COUNT(*) AS count FROM deliveries d JOIN receipts r ON r.id = d.receipt_id
             WHERE r.event_key LIKE ? GROUP BY d.status`,
          )
          .all(`${keyPrefix}%`) as Array<{ status: string; count: number }>,
    ),
  );
}

/** Statuses after which nothing more happens to a receipt without a human (replay). */
export const FINISHED_STATUSES = ["processed", "stale", "dead", "skipped"];

export function finishedCount(counts: ReadonlyMap<string, number>): number {
  return FINISHED_STATUSES.reduce((sum, status) => sum + (counts.get(status) ?? 0), 0);
}

/** Bytes in use: pages minus free pages (SQLite files keep freed pages for reuse and never shrink on their own). */
export function usedBytes(database: DatabaseSync): number {
  const pragma = (name: string) => (database.prepare(`PRAGMA ${name}`).get() as Record<string, number>)[name]!;
  return (pragma("page_count") - pragma("freelist_count")) * pragma("page_size");
}

/** Every claim shard's SQLite file under the persist directory. */
export function shardFiles(persistDir: string): string[] {
  const root = join(persistDir, "v3", "do");
  if (!existsSync(root)) return [];
  return readdirSync(root)
    .filter((name) => name.includes("ClaimShard"))
    .flatMap((name) =>
      readdirSync(join(root, name))
        .filter((file) => file.endsWith(".sqlite"))
        .map((file) => join(root, name, file)),
    )
    .filter((file) => statSync(file).size > 0);
}

/** The receiver's own per-event tables in D1; the handler's tables (accounts, object_versions, …) are the user's. */
const RECEIVER_TABLES = ["receipts", "deliveries", "attempts", "replays", "quarantine"];

/** Pages (bytes) the named tables and their indexes hold, unused room inside a page included, free pages not. */
function tableBytes(database: DatabaseSync, where: string, ...params: string[]): number {
  const row = database
    .prepare(
      `SELECT COALESCE(SUM(s.pgsize), 0) AS bytes FROM dbstat s JOIN sqlite_master m ON m.name = s.name WHERE ${where}`,
    )
    .get(...params) as { bytes: number };
  return row.bytes;
}

/**
 * What the receiver keeps for its events, in bytes, as storage is billed (database size: whole pages): in D1 the
 * pages of the receiver's own tables and their indexes, in the shards the pages of the claim partitions
 * (`event_claims`, `event_claims_1`, …). A shard's or a database's fixed tables are left out, so a difference
 * between two readings over N events is what those events keep. Read-only, so it may be read while the runtime runs.
 */
export function storedBytes(store: ReceiptStore, persistDir: string): { d1: number; shards: number } {
  const d1 = store
    .readEach((database) =>
      tableBytes(database, `m.tbl_name IN (${RECEIVER_TABLES.map(() => "?").join(", ")})`, ...RECEIVER_TABLES),
    )
    .reduce((sum, bytes) => sum + bytes, 0);
  const shards = shardFiles(persistDir).reduce((sum, file) => {
    const database = new DatabaseSync(file, { readOnly: true });
    try {
      database.exec("PRAGMA busy_timeout = 5000");
      return sum + tableBytes(database, "m.tbl_name LIKE 'event_claims%'");
    } finally {
      database.close();
    }
  }, 0);
  return { d1, shards };
}
