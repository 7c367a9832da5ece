import { DatabaseSync } from "node:sqlite";
import type { ReceiptStore } from "./store.ts";

/**
 * The order in which D1 itself applied plan changes, for the stale-write verdict. A receipt's `committed_at` is
 * the attempt's finish time on its consumer's clock, not D1's commit order: two slices committing one after the
 * other can carry times in the other order and look like a newer version overwritten by an older one. So the
 * correctness runtimes' D1 gets, before the runtime starts, a log table and triggers that record every write of
 * `accounts.plan_version` in the transaction that makes it, under a sequence SQLite assigns as it commits (one
 * writer at a time, and a rolled-back batch takes its row with it). Only the bench's own runtimes carry it: the
 * receiver's migrations never do, and the meters phase, which measures the rows an event writes, runs on
 * runtimes without it.
 */
const PLAN_WRITE_LOG = `
  CREATE TABLE IF NOT EXISTS bench_plan_writes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    account TEXT NOT NULL,
    version INTEGER NOT NULL
  );
  CREATE TRIGGER IF NOT EXISTS bench_plan_inserted AFTER INSERT ON accounts WHEN NEW.plan IS NOT NULL
  BEGIN
    INSERT INTO bench_plan_writes (account, version) VALUES (NEW.id, NEW.plan_version);
  END;
  CREATE TRIGGER IF NOT EXISTS bench_plan_updated AFTER UPDATE OF plan, plan_version ON accounts
  BEGIN
    INSERT INTO bench_plan_writes (account, version) VALUES (NEW.id, NEW.plan_version);
  END;
`;

/** Installs the log in the runtime's D1 file; call after the migrations and before the runtime starts. */
export function logPlanWrites(store: ReceiptStore): void {
  const database = new DatabaseSync(store.databaseFile());
  try {
    database.exec(PLAN_WRITE_LOG);
  } finally {
    database.close();
  }
}

export interface PlanWrite {
  account: string;
  version: number;
}

/**
 * Writes, in D1's order, that did not move their account's plan to a newer version than every write before them:
 * the version gate lets through only `plan_version < version`, so with it every one of these is a stale write.
 */
export function staleWrites(writesInOrder: readonly PlanWrite[]): number {
  const highest = new Map<string, number>();
  let stale = 0;
  for (const write of writesInOrder) {
    const before = highest.get(write.account);
    if (before !== undefined && write.version <= before) stale++;
    else highest.set(write.account, write.version);
  }
  return stale;
}

/** The logged plan writes of the accounts under `accountPrefix`, in the order D1 committed them. */
export function planWritesInOrder(database: DatabaseSync, accountPrefix: string): PlanWrite[] {
  return database
    .prepare("SELECT account, version FROM bench_plan_writes WHERE account LIKE ? ORDER BY seq")
    .all(`${accountPrefix}%`) as unknown as PlanWrite[];
}
