import { DEFAULT_DATABASE_BINDING } from "../../sources/config";
import { databaseBindingOf, envForSource, isPartitionedSource, receiptDatabaseEnvs } from "../../sources/databases";
import { receiptHolders } from "../../sources/receipt-homes";

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
 * The first answer `read` finds, trying each receipt database in turn, `first` (by default `DB`) and then the
 * others; null when none has it. A receipt where it was looked for first costs exactly the one read.
 *
 * @example
 *   const detail = await inFirstDatabase(env, (dbEnv) => receiptDetail(database(dbEnv), receiptId, env));
 */
export async function inFirstDatabase<T>(
  env: Env,
  read: (databaseEnv: Env, binding: string) => Promise<T | null>,
  first = DEFAULT_DATABASE_BINDING,
): Promise<T | null> {
  const databases = receiptDatabaseEnvs(env);
  const ordered = [
    ...databases.filter((entry) => entry.binding === first),
    ...databases.filter((entry) => entry.binding !== first),
  ];
  for (const { binding, env: databaseEnv } of ordered) {
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
export async function groupByDatabase(
  env: Env,
  receiptIds: readonly string[],
): Promise<(DatabaseEnv & { receiptIds: string[] })[]> {
  const databases = receiptDatabaseEnvs(env);
  if (databases.length === 1 || receiptIds.length === 0) return [{ ...databases[0]!, receiptIds: [...receiptIds] }];
  const holders = await receiptHolders(databases, receiptIds);
  const holderOf = (receiptId: string) => holders.get(receiptId) ?? DEFAULT_DATABASE_BINDING;
  return databases
    .map((entry) => ({ ...entry, receiptIds: receiptIds.filter((receiptId) => holderOf(receiptId) === entry.binding) }))
    .filter((group) => group.receiptIds.length > 0);
}

/**
 * The databases a per-source read visits: the one source's own when the read is about one source, else every one
 * (and every one for a partitioned source, whose receipts are spread over the ring).
 */
export function databasesToRead(env: Env, onlySource?: string): DatabaseEnv[] {
  if (onlySource === undefined || isPartitionedSource(env, onlySource)) return receiptDatabaseEnvs(env);
  const sourceEnv = envForSource(env, onlySource);
  return [{ binding: databaseBindingOf(env, onlySource), env: sourceEnv }];
}

/**
 * One map per source out of per-database maps: each source's entry comes from its own database, so a source that
 * moved keeps its numbers where its receipts now go. A partitioned source's receipts are spread over the ring, so
 * its entries from every database are joined with `combine` (a sum for a count). A source no SOURCES table names
 * any more (its receipts outlive its config) is taken from the first database, in `databasesToRead` order, that
 * has it.
 */
export function ownEntries<V>(
  env: Env,
  perDatabase: readonly { binding: string; entries: Iterable<[string, V]> }[],
  combine: (a: V, b: V) => V,
): Map<string, V> {
  const merged = new Map<string, V>();
  if (perDatabase.length === 1) return new Map(perDatabase[0]!.entries);
  for (const { binding, entries } of perDatabase) {
    for (const [source, value] of entries) {
      const seen = merged.get(source);
      if (isPartitionedSource(env, source)) merged.set(source, seen === undefined ? value : combine(seen, value));
      else {
        const home = homeDatabase(env, source);
        if (home === null ? !merged.has(source) : home === binding) merged.set(source, value);
      }
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
