/**
 * What a shard, the cron or a consumer reports about the system itself: the alert kinds and one observation. Its own
 * module so that the store limits (./store-limits.ts) and the rules (./conditions.ts) both name it without importing
 * each other.
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
  /** A shard's SQLite is at SHARD_SIZE_LIMIT_BYTES: it answers new keys 503 (./store-limits.ts). */
  | "shard-full"
  /** A receipt database is above 80 % of its limit (D1_SIZE_LIMIT_BYTES, D1's 10 GB by default). Reporter `database:<binding>`. */
  | "d1-storage"
  /** A receipt database is at its limit: the relay does not write it, its claims wait in the shards. Reporter `database:<binding>`. */
  | "d1-full"
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
