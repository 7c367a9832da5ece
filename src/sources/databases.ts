import { DEFAULT_DATABASE_BINDING, type SourceConfig } from "./config";
import { hasD1Binding, isD1Database } from "./d1-binding";
import { homeDatabaseOf, isPartitioned, partitionDatabaseOf, receiptPartitionsOf } from "./partitions";
import { loadSources } from "./registry";

/**
 * Past one database: each source names the D1 binding that holds its receipts (`database = "DB_EU"` in its
 * table; `DB` by default). Everything about one source — its receipts, attempts, replays, quarantine, the
 * re-drive and retention cursors over them, and its handler's effect rows — lives in that one database, so every
 * write the pipeline makes stays inside one D1 batch. System-wide tables (alerts, reconcile runs, handshake
 * secrets) stay in `DB`.
 *
 * The rest of the code reaches D1 through `database(env)`, which reads `env.DB`; the pipeline hands a source's
 * work an env whose `DB` is that source's database (`envForDatabase`). One relay batch and one queue message are
 * one source's, so they never span two databases.
 *
 * A source's `database` says where its new receipts go, not where every receipt of it is: one moved to another
 * database leaves its older receipts where they were. So work on a receipt follows the receipt: a queue message
 * names the database its receipts were found in (`databaseBindingIn`), and the readers look a receipt up in every
 * bound database (`receiptDatabaseBindings`) when it is not where they looked first.
 *
 * @example
 * // wrangler.toml: a second [[d1_databases]] entry with binding = "DB_EU", and [vars.SOURCES.stripe-eu]
 * // database = "DB_EU". Then:
 * const stripeEnv = envForSource(env, "stripe-eu"); // database(stripeEnv) reads and writes DB_EU
 */

/** Which binding an env from `envForDatabase` points `DB` at. A symbol, so it survives `{ ...env }` and no config can set it. */
const DATABASE_BINDING = Symbol("databaseBinding");
/** The Worker's own `DB`, kept by an env from `envForDatabase` whose `DB` is another, so it can point back at it. */
const DEFAULT_DATABASE = Symbol("defaultDatabase");

/**
 * `env` with `DB` pointing at another D1 binding: everything that takes `env` then works on that database. An env
 * that came from here may be pointed again, `DB` included (the ordering check reads every database from the one its
 * slice is in). Throws for a binding this Worker does not have (config validation refuses such a source first).
 */
export function envForDatabase<E extends Pick<Env, "DB">>(env: E, binding: string): E {
  if (binding === databaseBindingIn(env)) return env;
  const defaultDatabase = (env as { [DEFAULT_DATABASE]?: D1Database })[DEFAULT_DATABASE] ?? env.DB;
  const d1 = binding === DEFAULT_DATABASE_BINDING ? defaultDatabase : (env as Record<string, unknown>)[binding];
  if (!isD1Database(d1)) throw new Error(`this Worker has no D1 binding named ${binding}`);
  return { ...env, DB: d1, [DATABASE_BINDING]: binding, [DEFAULT_DATABASE]: defaultDatabase };
}

/** The binding `env.DB` is: `DB` unless `env` came from `envForDatabase`. What a queue message names as its database. */
export function databaseBindingIn(env: object): string {
  return (env as { [DATABASE_BINDING]?: string })[DATABASE_BINDING] ?? DEFAULT_DATABASE_BINDING;
}

/**
 * The database binding a source's receipts live in. A valid source says so in its config; a broken one (or one
 * no longer configured) is read from its raw table when that names a database this Worker has, so its receipts
 * stay readable and its work in flight keeps its place; otherwise `DB`. A partitioned source's receipts are spread
 * over the ring (`receiptDatabaseBindingOf` says which holds one): its own state lives in `DB` (`homeDatabaseOf`).
 */
export function databaseBindingOf(env: Pick<Env, "SOURCES">, source: string): string {
  const valid = validSource(env, source);
  if (valid !== undefined) return homeDatabaseOf(valid);
  const raw = rawDatabaseNames(env).get(source);
  return raw !== undefined && hasD1Binding(env, raw) ? raw : DEFAULT_DATABASE_BINDING;
}

/**
 * The database a new receipt of `source` goes to: for a partitioned source, the ring's database for its id
 * (src/sources/partitions.ts); for any other, the source's database.
 */
export function receiptDatabaseBindingOf(env: Pick<Env, "SOURCES">, source: string, receiptId: string): string {
  const valid = validSource(env, source);
  if (valid === undefined || !isPartitioned(valid)) return databaseBindingOf(env, source);
  const ring = receiptPartitionsOf(env);
  // A valid partitioned source implies a valid ring (registry.ts refuses the source otherwise).
  return ring.ok && ring.partitions ? partitionDatabaseOf(ring.partitions, receiptId) : DEFAULT_DATABASE_BINDING;
}

/** Whether `source` is valid and keeps its receipts in the ring: then no one database holds all of them. */
export function isPartitionedSource(env: Pick<Env, "SOURCES">, source: string): boolean {
  const valid = validSource(env, source);
  return valid !== undefined && isPartitioned(valid);
}

function validSource(env: Pick<Env, "SOURCES">, source: string): SourceConfig | undefined {
  try {
    return loadSources(env).get(source);
  } catch {
    // SOURCES itself unreadable: the caller falls back to the raw table.
    return undefined;
  }
}

/** `env` for one source's work: its `DB` is the source's database. */
export function envForSource<E extends Pick<Env, "DB" | "SOURCES">>(env: E, source: string): E {
  return envForDatabase(env, databaseBindingOf(env, source));
}

/**
 * Every database that may hold receipts: `DB` first, then every other D1 binding this Worker has, in name order.
 * Every bound database gets the receipt migrations, and one no source names any more still holds the receipts of
 * a source that moved away from it: its retries still finish, its dead letters stay replayable. Cross-database
 * reads (the admin API, the dashboard, the watch) and the cron's per-database work (re-drive, retention) go over
 * these.
 */
export function receiptDatabaseBindings(env: object): string[] {
  const others = Object.keys(env).filter(
    (binding) => binding !== DEFAULT_DATABASE_BINDING && hasD1Binding(env, binding),
  );
  return [DEFAULT_DATABASE_BINDING, ...others.sort()];
}

/** Whether `binding` is one of this Worker's receipt databases (a message may name one a later deploy unbound). */
export function isReceiptDatabase(env: object, binding: string): boolean {
  return binding === DEFAULT_DATABASE_BINDING || hasD1Binding(env, binding);
}

/** Each receipt database with the env that works on it. */
export function receiptDatabaseEnvs<E extends Pick<Env, "DB" | "SOURCES">>(env: E): { binding: string; env: E }[] {
  return receiptDatabaseBindings(env).map((binding) => ({ binding, env: envForDatabase(env, binding) }));
}

/** The `database` key of every source table that has one as a string, whether or not the table is valid. */
function rawDatabaseNames(env: Pick<Env, "SOURCES">): Map<string, string> {
  const tables: unknown = env.SOURCES;
  const names = new Map<string, string>();
  if (!tables || typeof tables !== "object") return names;
  for (const [source, table] of Object.entries(tables as Record<string, unknown>)) {
    const database = table && typeof table === "object" ? (table as { database?: unknown }).database : undefined;
    if (typeof database === "string") names.set(source, database);
  }
  return names;
}
