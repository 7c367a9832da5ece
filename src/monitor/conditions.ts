/**
 * Self-monitoring that does not depend on D1: the conditions the claim shards and the cron observe about the
 * system itself, and the pure rules that turn observations into alert transitions. The state lives in the
 * SystemMonitor Durable Object (src/reconcile/system-monitor.ts), never in D1, so an alert can open while D1 is
 * down; it is copied into D1's `alerts` table once D1 answers again.
 */

import type { Observation, SystemAlertKind } from "./observation";
import {
  bytesVar,
  databaseLimit,
  databaseStoreObservations,
  STORE_CAP_BYTES,
  type StoreLimit,
  storeVerdict,
} from "./store-limits";

/** Consecutive relay failures before "relay-failing" (D1 itself reachable). */
export const RELAY_FAILURES_ALERT = 3;
export const SHARD_BACKLOG_ALERT = 10_000;
/** Half of a Durable Object's 10 GB: room for a day's outage at the rates docs/operating.md names. */
export const SHARD_STORAGE_ALERT_BYTES = 5 * 1024 ** 3;
export { D1_STORAGE_ALERT_FRACTION, STORE_CAP_BYTES as D1_CAP_BYTES } from "./store-limits";

/**
 * Kinds that describe one shared thing (D1, the cron): any reporter seeing it quiet clears it for everyone. The
 * others are per shard: the alert stays open while any shard still reports it.
 */
const SHARED_KINDS: ReadonlySet<SystemAlertKind> = new Set(["d1-unreachable", "cron-failed"]);

export function isSharedKind(kind: SystemAlertKind): boolean {
  return SHARED_KINDS.has(kind);
}

/**
 * What one report does to the set of reporters currently seeing a kind fire, and whether the alert opens or
 * resolves. `open` says whether an incident of this kind is open now.
 */
export function nextState(
  kind: SystemAlertKind,
  firingReporters: ReadonlySet<string>,
  observation: Pick<Observation, "reporter" | "firing">,
  open: boolean,
): { reporters: Set<string>; transition: "open" | "resolve" | "none" } {
  const reporters = new Set(firingReporters);
  if (observation.firing) reporters.add(observation.reporter);
  else if (isSharedKind(kind)) reporters.clear();
  else reporters.delete(observation.reporter);
  const firing = reporters.size > 0;
  return { reporters, transition: firing && !open ? "open" : !firing && open ? "resolve" : "none" };
}

/** The shard's observations after a failed relay. */
export function relayFailureObservations(
  reporter: string,
  facts: { d1Reachable: boolean; failures: number; backlog: number; storageBytes: number },
  thresholds?: ShardThresholds,
): Observation[] {
  return [
    {
      kind: "d1-unreachable",
      reporter,
      firing: !facts.d1Reachable,
      message: `D1 did not answer a claim shard's relay (${facts.failures} failed in a row); accepted events wait in the shard.`,
    },
    {
      kind: "relay-failing",
      reporter,
      firing: facts.d1Reachable && facts.failures >= RELAY_FAILURES_ALERT,
      message: `A claim shard's relay failed ${facts.failures} times in a row while D1 answered (the queue or R2 refusing).`,
    },
    ...storageObservations(reporter, facts, thresholds),
  ];
}

export interface ShardThresholds {
  backlog: number;
  /** Above it, "shard-storage" warns. */
  storageBytes: number;
  /** At it, the shard refuses new keys and "shard-full" fires (./store-limits.ts). */
  limitBytes: number;
}

/**
 * The shard thresholds: the defaults above, or the vars ALERT_SHARD_BACKLOG, ALERT_SHARD_STORAGE_BYTES and
 * SHARD_SIZE_LIMIT_BYTES (whole numbers) when set.
 */
export function shardThresholds(env: object): ShardThresholds {
  return {
    backlog: bytesVar(env, "ALERT_SHARD_BACKLOG", SHARD_BACKLOG_ALERT),
    storageBytes: bytesVar(env, "ALERT_SHARD_STORAGE_BYTES", SHARD_STORAGE_ALERT_BYTES),
    limitBytes: bytesVar(env, "SHARD_SIZE_LIMIT_BYTES", STORE_CAP_BYTES),
  };
}

/** What a shard does with a new key at its size: write, write and warn, or refuse (answer 503). */
export function shardVerdict(storageBytes: number, thresholds: ShardThresholds) {
  return storeVerdict(storageBytes, {
    limitBytes: thresholds.limitBytes,
    warnAboveBytes: Math.min(thresholds.storageBytes, thresholds.limitBytes - 1),
  });
}

/** Backlog and storage of one shard, checked on every failed relay and every cron visit. */
export function storageObservations(
  reporter: string,
  facts: { backlog: number; storageBytes: number },
  thresholds: ShardThresholds = shardThresholds({}),
): Observation[] {
  const verdict = shardVerdict(facts.storageBytes, thresholds);
  return [
    {
      kind: "shard-backlog",
      reporter,
      firing: facts.backlog >= thresholds.backlog,
      message: `A claim shard holds ${facts.backlog >= thresholds.backlog ? "at least " : ""}${facts.backlog} unrelayed claims (alert at ${thresholds.backlog}).`,
    },
    {
      kind: "shard-storage",
      reporter,
      firing: verdict !== "write",
      message: `A claim shard stores ${facts.storageBytes} bytes (alert above ${thresholds.storageBytes}; a Durable Object holds 10 GB).`,
    },
    {
      kind: "shard-full",
      reporter,
      firing: verdict === "refuse",
      message: `A claim shard stores ${facts.storageBytes} bytes, at its limit of ${thresholds.limitBytes} (SHARD_SIZE_LIMIT_BYTES): it answers new events 503 until it has room.`,
    },
  ];
}

/** What the cron found of one D1 database: whether it answered, and its size when D1 reports it. */
export interface DatabaseAnswer {
  binding: string;
  reachable: boolean;
  sizeBytes: number | null;
}

/**
 * The cron's observations about one run: whether it failed, whether every receipt database answered, and each
 * sized database against its limit (`limit`, from D1_SIZE_LIMIT_BYTES: the same decision the relay makes before
 * writing, so a database that shrank back under it, or whose limit was raised, has its alerts cleared here even if
 * no relay goes to it).
 */
export function cronObservations(
  facts: { databases: readonly DatabaseAnswer[]; failedSteps: string[] },
  limit: StoreLimit = databaseLimit({}),
): Observation[] {
  const unreachable = facts.databases.filter((database) => !database.reachable).map((database) => database.binding);
  const observations: Observation[] = [
    {
      kind: "d1-unreachable",
      reporter: "cron",
      firing: unreachable.length > 0,
      message: `The cron could not reach D1 (${unreachable.join(", ") || "none"}): nothing is relayed, processed or cleaned up there until it answers.`,
    },
    {
      kind: "cron-failed",
      reporter: "cron",
      firing: facts.failedSteps.length > 0,
      message: `The cron run failed: ${facts.failedSteps.join(", ") || "none"}.`,
    },
    // "d1-storage" was once reported by "cron" for the fullest database; it is per database now, so a monitor
    // that still holds that reporter from before the upgrade lets it go.
    { kind: "d1-storage", reporter: "cron", firing: false, message: "d1-storage is reported per database" },
  ];
  // A database bound (again) has ended its `database-unbound` alert: messages naming it are read there now.
  for (const database of facts.databases) observations.push(unboundDatabaseObservation(database.binding, false));
  for (const database of facts.databases) {
    if (database.sizeBytes !== null)
      observations.push(...databaseStoreObservations(database.binding, database.sizeBytes, limit));
  }
  return observations;
}

/**
 * A message names `binding`, which this Worker no longer binds, and no bound database holds some of its receipts:
 * they are retried, never acked, until the binding is back or the queue gives the message to its dead-letter queue.
 * One reporter per binding, so the alert stays open until every such binding is bound again (the cron says so).
 */
export function unboundDatabaseObservation(binding: string, firing: boolean, receipts = 0): Observation {
  return {
    kind: "database-unbound",
    reporter: `database:${binding}`,
    firing,
    message: firing
      ? `Queue messages name D1 binding ${binding}, which this Worker no longer has, and ${receipts} of their receipts are in no bound database: bind it again, or they end in the dead-letter queue unprocessed.`
      : `D1 binding ${binding} is bound.`,
  };
}
