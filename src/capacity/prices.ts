/**
 * Cloudflare's published list prices (USD, Workers Paid, beyond each product's monthly inclusion), the one home of
 * every price the project computes with: the bench's meters and all-in figures (bench/lib/meters.ts, all-in.ts) and
 * the capacity model (./model.ts). Sources and the rule each applies: docs/performance.md, "Prices". No imports, so
 * Node runs this file as it is (the bench loads it with --experimental-strip-types).
 */

/** Requests, rows and queue operations: the happy path's bill. Read 2026-11-30. */
export const PRICES = {
  workersRequestPerMillion: 0.3,
  durableObjectRequestPerMillion: 0.15,
  rowsReadPerMillion: 0.001,
  rowsWrittenPerMillion: 1.0,
  queueOperationPerMillion: 0.4,
} as const;

/** Everything else an event costs over its life. Read 2026-12-02. */
export const ALL_IN_PRICES = {
  /** Workers Logs: log events beyond 20 million a month. */
  logLinePerMillion: 0.6,
  /** Workers Analytics Engine: data points written beyond 10 million a month. */
  analyticsPointPerMillion: 0.25,
  /** R2 Standard: Class A (put) beyond 1 million a month, Class B (get) beyond 10 million; deletes are free. */
  r2ClassAPerMillion: 4.5,
  r2ClassBPerMillion: 0.36,
  /** R2 Standard storage beyond 10 GB-month. */
  r2StoragePerGbMonth: 0.015,
  /** D1 storage beyond 5 GB (the database's size, tables and indexes). */
  d1StoragePerGbMonth: 0.75,
  /** Durable Object SQLite storage beyond 5 GB-month. */
  durableObjectStoragePerGbMonth: 0.2,
  /** Workers Standard CPU time beyond 30 million CPU-ms a month. */
  cpuMsPerMillion: 0.02,
  /**
   * Durable Object duration beyond 400,000 GB-s a month: an object is billed 128 MB for every second it is awake,
   * whatever it does, so a claim shard that hears from its source every few seconds costs it around the clock.
   */
  durableObjectDurationPerMillionGbSeconds: 12.5,
} as const;

/** The memory a Durable Object is billed for while awake (duration is GB-seconds of it). */
export const DURABLE_OBJECT_BILLED_GB = 0.128;
