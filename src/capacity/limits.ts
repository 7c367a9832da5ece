import { MAX_SHARD_COUNT } from "../claims/shard-layouts";
import { STORE_CAP_BYTES } from "../monitor/store-limits";

/**
 * Cloudflare's published limits the capacity model holds a rate against (Workers Paid; read 2026-12-04 from the D1
 * and Durable Objects limits pages). The two 10 GB caps are the ones the relay and the shards stop writing at by default
 * (src/monitor/store-limits.ts).
 */
export const PUBLISHED_LIMITS = {
  /** One D1 database's size. */
  d1DatabaseBytes: STORE_CAP_BYTES,
  /** Every D1 database of one account together. */
  d1AccountBytes: 1024 ** 4,
  /** One Durable Object's SQLite storage: a claim shard. */
  durableObjectBytes: STORE_CAP_BYTES,
  /** The soft limit of requests a second one Durable Object serves (docs/performance.md, "Capacity"). */
  durableObjectRequestsPerSecond: 1_000,
  /** Claim shards of one source (CLAIM_SHARD_COUNT's ceiling, src/claims/routing.ts). */
  claimShardsPerSource: MAX_SHARD_COUNT,
  /**
   * The time one D1 database has a second to run its queries in, one at a time: a throughput ceiling of the database
   * the receipts are written to, not a storage one.
   */
  d1QueryMsPerSecond: 1_000,
  /** What one query takes at the least, on Cloudflare's guidance (about 1,000 queries a second a database). */
  d1MsPerQuery: 1,
} as const;

export const DAY_MS = 86_400_000;
/** Months in the storage prices' GB-month: the bench's all-in figure counts a month as 30 days (bench/lib/all-in.ts). */
export const DAYS_PER_MONTH = 30;
/** GB in the storage prices' GB-month (bench/lib/all-in.ts divides bytes by 1e9 too). */
export const BYTES_PER_PRICED_GB = 1e9;
