import { readdirSync } from "node:fs";
import { join } from "node:path";
import { DatabaseSync } from "node:sqlite";

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

  databaseFile(): string {
    const directory = join(this.persistDir, "v3", "d1", "miniflare-D1DatabaseObject");
    const name = readdirSync(directory).find((entry) => /^[0-9a-f]{64}\.sqlite$/.test(entry));
    if (!name) throw new Error(`no D1 database under ${directory}`);
    return join(directory, name);
  }

  /** Runs `read` on a fresh read-only connection, so every poll sees the latest committed state. */
  read<T>(read: (database: DatabaseSync) => T): T {
    const database = new DatabaseSync(this.databaseFile(), { readOnly: true });
    try {
      database.exec("PRAGMA busy_timeout = 5000");
      return read(database);
    } finally {
      database.close();
    }
  }

  /** Receipts of this run's keys by status, whatever source they came through (each phase's key prefix is its own). */
  statusCounts(keyPrefix: string): Map<string, number> {
    return this.read((database) => {
      const rows = database
        .prepare("SELECT status, COUNT(*) AS count FROM receipts WHERE event_key LIKE ? GROUP BY status")
        .all(`${keyPrefix}%`) as Array<{ status: string; count: number }>;
      return new Map(rows.map((row) => [row.status, row.count]));
    });
  }
}

/**
 * Further routes' deliveries of this run's keys by status (docs/processing.md, "Deliveries"): written with their
 * receipt's first outcome, so once every receipt is finished these say whether every route's work is.
 */
export function deliveryStatusCounts(store: ReceiptStore, keyPrefix: string): Map<string, number> {
  return store.read((database) => {
    const rows = database
      .prepare(
        `SELECT d.status AS status, COUNT(*) AS count FROM deliveries d JOIN receipts r ON r.id = d.receipt_id
         WHERE r.event_key LIKE ? GROUP BY d.status`,
      )
      .all(`${keyPrefix}%`) as Array<{ status: string; count: number }>;
    return new Map(rows.map((row) => [row.status, row.count]));
  });
}

/** Statuses after which nothing more happens to a receipt without a human (replay). */
export const FINISHED_STATUSES = ["processed", "stale", "dead", "skipped"];

export function finishedCount(counts: ReadonlyMap<string, number>): number {
  return FINISHED_STATUSES.reduce((sum, status) => sum + (counts.get(status) ?? 0), 0);
}
