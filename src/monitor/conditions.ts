/**
 * Self-monitoring that does not depend on D1: the conditions the claim shards and the cron observe about the
 * system itself, and the pure rules that turn observations into alert transitions. The state lives in the
 * SystemMonitor Durable Object (src/reconcile/system-monitor.ts), never in D1, so an alert can open while D1 is
 * down; it is copied into D1's `alerts` table once D1 answers again.
 */

export type SystemAlertKind =
  /** A shard or the cron could not reach D1. */
  | "d1-unreachable"
  /** A shard's relay failed several times in a row while D1 answered (the queue or R2 refusing). */
  | "relay-failing"
  /** A cron run failed outright or recorded failed steps. */
  | "cron-failed"
  /** A shard holds more unrelayed claims than SHARD_BACKLOG_ALERT. */
  | "shard-backlog"
  /** A shard's SQLite is larger than SHARD_STORAGE_ALERT_BYTES. */
  | "shard-storage"
  /** D1 is above 80 % of its 10 GB cap. */
  | "d1-storage"
  /** A queue message names a D1 binding this Worker no longer has, and no bound database holds its receipts. */
  | "database-unbound"
  /** A route's circuit breaker is open (src/gate/): its deliveries are held. Reporter `route:<source>/<route>`. */
  | "route-breaker-open";

export interface Observation {
  kind: SystemAlertKind;
  /** Who saw it: `cron`, `shard:<id>`, or `database:<binding>` (an unbound database the consumer was sent to). */
  reporter: string;
  firing: boolean;
  /** Counts and times only: never payloads, headers or secrets. */
  message: string;
}

/** Consecutive relay failures before "relay-failing" (D1 itself reachable). */
export const RELAY_FAILURES_ALERT = 3;
export const SHARD_BACKLOG_ALERT = 10_000;
/** Half of a Durable Object's 10 GB: room for a day's outage at the rates docs/operating.md names. */
export const SHARD_STORAGE_ALERT_BYTES = 5 * 1024 ** 3;
export const D1_CAP_BYTES = 10 * 1024 ** 3;
export const D1_STORAGE_ALERT_FRACTION = 0.8;

/**
 * Kinds that describe one shared thing (D1, the cron): any reporter seeing it quiet clears it for everyone. The
 * others are per shard: the alert stays open while any shard still reports it.
 */
const SHARED_KINDS: ReadonlySet<SystemAlertKind> = new Set(["d1-unreachable", "cron-failed", "d1-storage"]);

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
  storageBytes: number;
}

/**
 * The shard thresholds: the defaults above, or the vars ALERT_SHARD_BACKLOG and ALERT_SHARD_STORAGE_BYTES (whole
 * numbers) when set.
 */
export function shardThresholds(env: object): ShardThresholds {
  const vars = env as Record<string, unknown>;
  const whole = (value: unknown, fallback: number) => {
    const parsed = typeof value === "string" ? Number(value) : Number.NaN;
    return Number.isSafeInteger(parsed) && parsed > 0 ? parsed : fallback;
  };
  return {
    backlog: whole(vars.ALERT_SHARD_BACKLOG, SHARD_BACKLOG_ALERT),
    storageBytes: whole(vars.ALERT_SHARD_STORAGE_BYTES, SHARD_STORAGE_ALERT_BYTES),
  };
}

/** Backlog and storage of one shard, checked on every failed relay and every cron visit. */
export function storageObservations(
  reporter: string,
  facts: { backlog: number; storageBytes: number },
  thresholds: ShardThresholds = { backlog: SHARD_BACKLOG_ALERT, storageBytes: SHARD_STORAGE_ALERT_BYTES },
): Observation[] {
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
      firing: facts.storageBytes > thresholds.storageBytes,
      message: `A claim shard stores ${facts.storageBytes} bytes (alert above ${thresholds.storageBytes}; a Durable Object holds 10 GB).`,
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
 * The cron's observations about one run: whether it failed, whether every receipt database answered, and the
 * fullest database's size against the cap (each D1 database has its own 10 GB: the alert is about the one that
 * reaches it first).
 */
export function cronObservations(facts: {
  databases: readonly DatabaseAnswer[];
  failedSteps: string[];
}): Observation[] {
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
  ];
  // A database bound (again) has ended its `database-unbound` alert: messages naming it are read there now.
  for (const database of facts.databases) observations.push(unboundDatabaseObservation(database.binding, false));
  const sized = facts.databases.filter(
    (database): database is DatabaseAnswer & { sizeBytes: number } => database.sizeBytes !== null,
  );
  const fullest = sized.reduce<(typeof sized)[number] | null>(
    (largest, database) => (largest === null || database.sizeBytes > largest.sizeBytes ? database : largest),
    null,
  );
  if (fullest !== null) {
    observations.push({
      kind: "d1-storage",
      reporter: "cron",
      firing: fullest.sizeBytes > D1_CAP_BYTES * D1_STORAGE_ALERT_FRACTION,
      message: `D1 database ${fullest.binding} holds ${megabytes(fullest.sizeBytes)} MB of its ${megabytes(D1_CAP_BYTES)} MB cap.`,
    });
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

function megabytes(bytes: number): number {
  return Math.round(bytes / 1024 ** 2);
}
