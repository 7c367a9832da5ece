import { database } from "../db/client";
import { inJsonList } from "../db/id-list";
import { receipts } from "../db/schema";
import { databaseBindingOf, envForSource, receiptDatabaseEnvs } from "../sources/databases";

/**
 * Where the admin surface finds receipts once they live in several D1 databases (src/sources/databases.ts). A
 * receipt id does not say which database holds it, so a by-id action looks; a per-source number comes from that
 * source's own database. Each helper asks nothing extra when `DB` is the only receipt database, so a
 * one-database deployment pays what it paid before.
 */

export interface DatabaseEnv {
  /** The D1 binding's name ("DB", "DB_EU", …). */
  binding: string;
  /** `env` whose `DB` is that database: everything that takes `env` works on it. */
  env: Env;
}

/**
 * The first answer `read` finds, trying each receipt database in turn, `DB` first; null when none has it. A
 * receipt in `DB` costs exactly the one read it cost before.
 *
 * @example
 *   const detail = await inFirstDatabase(env, (dbEnv) => receiptDetail(database(dbEnv), receiptId, env));
 */
export async function inFirstDatabase<T>(env: Env, read: (databaseEnv: Env, binding: string) => Promise<T | null>): Promise<T | null> {
  for (const { binding, env: databaseEnv } of receiptDatabaseEnvs(env)) {
    const found = await read(databaseEnv, binding);
    if (found !== null) return found;
  }
  return null;
}

/**
 * The ids grouped by the database that holds them, with one primary-key query per database (none when `DB` is
 * the only one). Ids no database holds are grouped under `DB`, where the action reports them as it always did
 * (not found, not dead). Groups keep the ids' order; empty groups are left out.
 */
export async function groupByDatabase(env: Env, receiptIds: readonly string[]): Promise<(DatabaseEnv & { receiptIds: string[] })[]> {
  const databases = receiptDatabaseEnvs(env);
  if (databases.length === 1 || receiptIds.length === 0) return [{ ...databases[0]!, receiptIds: [...receiptIds] }];
  const holders = await Promise.all(
    databases.map(async ({ env: databaseEnv }) => {
      const rows = await database(databaseEnv).select({ receiptId: receipts.receiptId }).from(receipts).where(inJsonList(receipts.receiptId, receiptIds));
      return new Set(rows.map((row) => row.receiptId));
    }),
  );
  // An id in two databases cannot be minted (ids are ULIDs), but if it were, the first database answers for it.
  const holderOf = (receiptId: string) => Math.max(0, holders.findIndex((held) => held.has(receiptId)));
  return databases
    .map((entry, index) => ({ ...entry, receiptIds: receiptIds.filter((receiptId) => holderOf(receiptId) === index) }))
    .filter((group) => group.receiptIds.length > 0);
}

/** The databases a per-source read visits: the one source's own when the read is about one source, else every one. */
export function databasesToRead(env: Env, onlySource?: string): DatabaseEnv[] {
  if (onlySource === undefined) return receiptDatabaseEnvs(env);
  const sourceEnv = envForSource(env, onlySource);
  return [{ binding: databaseBindingOf(env, onlySource), env: sourceEnv }];
}

/**
 * One map per source out of per-database maps: each source's entry comes from its own database, so a source that
 * moved keeps its numbers where its receipts now go. A source no SOURCES table names any more (its receipts
 * outlive its config) is taken from the first database, in `databasesToRead` order, that has it.
 */
export function ownEntries<V>(env: Env, perDatabase: readonly { binding: string; entries: Iterable<[string, V]> }[]): Map<string, V> {
  const merged = new Map<string, V>();
  if (perDatabase.length === 1) return new Map(perDatabase[0]!.entries);
  for (const { binding, entries } of perDatabase) {
    for (const [source, value] of entries) {
      const home = homeDatabase(env, source);
      if (home === null ? !merged.has(source) : home === binding) merged.set(source, value);
    }
  }
  return merged;
}

/** The database a SOURCES table puts the source in, or null when no table names the source. */
function homeDatabase(env: Env, source: string): string | null {
  const tables: unknown = env.SOURCES;
  const named = !!tables && typeof tables === "object" && Object.hasOwn(tables, source);
  return named ? databaseBindingOf(env, source) : null;
}
