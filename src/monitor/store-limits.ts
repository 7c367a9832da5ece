import type { Observation } from "./observation";

/**
 * How full a store may get before the pipeline stops writing to it: each D1 receipt database and each claim shard's
 * SQLite has a hard cap (10 GB for both on Workers Paid), and a write past it fails in the middle of a relay or a
 * claim. So each store has a configured limit below or at the cap and a warning threshold under it; the decision is
 * made here, from a size the caller measured, and the caller does the I/O (src/relay/database-room.ts for D1, the
 * claim shard for its own SQLite).
 *
 * Vars (whole numbers of bytes; anything else falls back to the default):
 *   D1_SIZE_LIMIT_BYTES     a receipt database at or above it is not written (default 10 GiB, D1's cap);
 *                           warned from 80 % of it (D1_STORAGE_ALERT_FRACTION).
 *   SHARD_SIZE_LIMIT_BYTES  a claim shard at or above it answers a new key 503 (default 10 GiB, a Durable Object's
 *                           cap); warned above ALERT_SHARD_STORAGE_BYTES (src/monitor/conditions.ts).
 */

/** D1's size cap per database, and a Durable Object's. */
export const STORE_CAP_BYTES = 10 * 1024 ** 3;
/** The share of a database's limit from which "d1-storage" fires: the cron's and the relay's threshold alike. */
export const D1_STORAGE_ALERT_FRACTION = 0.8;

export type StoreVerdict = "write" | "write-and-warn" | "refuse";

export interface StoreLimit {
  /** At or above it, nothing new is written. */
  limitBytes: number;
  /** Above it (and below the limit), writes go on and the store's warning is raised. */
  warnAboveBytes: number;
}

/** The one decision: write, write but warn, or refuse (the caller then keeps the work where it is and alerts). */
export function storeVerdict(sizeBytes: number, limit: StoreLimit): StoreVerdict {
  if (sizeBytes >= limit.limitBytes) return "refuse";
  if (sizeBytes > limit.warnAboveBytes) return "write-and-warn";
  return "write";
}

/** A var holding a whole, positive number of bytes, or the fallback. */
export function bytesVar(env: object, name: string, fallback: number): number {
  const value = (env as Record<string, unknown>)[name];
  const parsed = typeof value === "string" ? Number(value) : Number.NaN;
  return Number.isSafeInteger(parsed) && parsed > 0 ? parsed : fallback;
}

/** Every receipt database's limit (one var for all: each D1 database has the same cap). */
export function databaseLimit(env: object): StoreLimit {
  const limitBytes = bytesVar(env, "D1_SIZE_LIMIT_BYTES", STORE_CAP_BYTES);
  return { limitBytes, warnAboveBytes: Math.floor(limitBytes * D1_STORAGE_ALERT_FRACTION) };
}

/** What one database's size says, as the two alerts of that database: `database:<binding>` reports both. */
export function databaseStoreObservations(binding: string, sizeBytes: number, limit: StoreLimit): Observation[] {
  const verdict = storeVerdict(sizeBytes, limit);
  const held = `D1 database ${binding} holds ${megabytes(sizeBytes)} MB`;
  return [
    {
      kind: "d1-storage",
      reporter: `database:${binding}`,
      firing: verdict !== "write",
      message: `${held}, above ${megabytes(limit.warnAboveBytes)} MB of its ${megabytes(limit.limitBytes)} MB limit (D1_SIZE_LIMIT_BYTES).`,
    },
    {
      kind: "d1-full",
      reporter: `database:${binding}`,
      firing: verdict === "refuse",
      message: `${held}, at its ${megabytes(limit.limitBytes)} MB limit (D1_SIZE_LIMIT_BYTES): its receipts are not relayed and wait in the claim shards.`,
    },
  ];
}

function megabytes(bytes: number): string {
  const value = bytes / 1024 ** 2;
  return value >= 10 ? String(Math.round(value)) : value.toFixed(2);
}
