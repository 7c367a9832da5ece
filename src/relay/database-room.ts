import { meteredD1 } from "../lib/meter";
import type { RelayReport } from "../model/claims";
import type { Observation } from "../monitor/observation";
import { databaseLimit, databaseStoreObservations, type StoreVerdict, storeVerdict } from "../monitor/store-limits";
import { databaseBindingIn } from "../sources/databases";

/**
 * Whether a receipt database has room for a relay batch: the I/O around the pure decision in
 * src/monitor/store-limits.ts. D1 reports a database's size in every result (`meta.size_after`), so the size a
 * relay batch left behind is remembered per binding in this isolate and the next batch is decided from it at no
 * cost. Only a database never written from this isolate, or one whose remembered size says "refuse", is asked
 * afresh (one `SELECT 1`): a database that was full is looked at again on each retry, so raising its limit or
 * freeing it is seen at once.
 */

const sizeSeen = new Map<string, number>();

/**
 * What a relay did: its counts, what it held back in the shard because a database was at its size limit, and what
 * it saw of each database's size, for the shard to tell the monitor (src/monitor/shard-watch.ts).
 */
export type RelayOutcome = Omit<RelayReport, "remaining" | "heldBack"> & {
  held: { receiptIds: Set<string>; quarantineIds: Set<string> };
  storeObservations: Observation[];
};

export interface DatabaseRoom {
  verdict: StoreVerdict;
  /** The database's "d1-storage" and "d1-full" as of this size, for the shard to tell the monitor on a change. */
  observations: Observation[];
}

/**
 * `env` is a database's env (src/sources/databases.ts `envForDatabase`): its `DB` is the database weighed. `askAfresh`
 * (the shard's relays have been failing) asks even a remembered database: the `SELECT 1` is then the relay's probe of
 * D1, and an outage that still lasts fails there, before the batch's bodies are written to R2 for nothing.
 */
export async function roomIn(env: Env, askAfresh = false): Promise<DatabaseRoom> {
  const binding = databaseBindingIn(env);
  const limit = databaseLimit(env);
  let size = sizeSeen.get(binding);
  if (askAfresh || size === undefined || storeVerdict(size, limit) === "refuse")
    size = await measuredSize(env, binding);
  // D1 not saying (it always has so far): nothing to decide on, so the relay goes ahead as it always did.
  if (size === undefined) return { verdict: "write", observations: [] };
  return { verdict: storeVerdict(size, limit), observations: databaseStoreObservations(binding, size, limit) };
}

/** Remembers the size a relay batch's results report (the largest: each statement reports the size after it). */
export function rememberSize(env: Env, results: readonly D1Result[]): void {
  const sizes = results.map(sizeAfter).filter((size): size is number => size !== undefined);
  if (sizes.length > 0) sizeSeen.set(databaseBindingIn(env), Math.max(...sizes));
}

async function measuredSize(env: Env, binding: string): Promise<number | undefined> {
  const size = sizeAfter(await meteredD1(env.DB).prepare("SELECT 1").run());
  if (size !== undefined) sizeSeen.set(binding, size);
  return size;
}

function sizeAfter(result: D1Result): number | undefined {
  const size = (result.meta as { size_after?: unknown } | undefined)?.size_after;
  return typeof size === "number" ? size : undefined;
}
