/**
 * Everything one event costs over its whole life, at list prices beyond the Workers Paid plan's monthly inclusions,
 * from measured units: the happy path (acceptance, relay, processing: bench/lib/meters.ts), retention's deletes
 * in D1 and the shards (the cron run over the events after their windows), the log lines and Analytics Engine
 * points the runtime's meters counted, R2 operations and storage for a stated share of large bodies, what D1 and
 * the shards store for the event over its retention windows, and the runtime's CPU time. Pure arithmetic: every unit comes from a measurement; the rules are in docs/performance.md.
 */

import { ALL_IN_PRICES, PRICES } from "../../src/capacity/prices.ts";
import type { PerEvent } from "./meters.ts";

/** One home for prices, shared with the capacity model; read 2026-12-02. */
export { ALL_IN_PRICES } from "../../src/capacity/prices.ts";

/** Units per event from the runtime's meters; any of PerEvent's, plus the meters that are not on the happy path's bill. */
export interface LifetimeUnits {
  happy: PerEvent & { logLines: number; analyticsPoints: number };
  /** Retention's units per event: rows written and read in D1 and the shards, requests, log lines. */
  retention: {
    d1RowsWritten: number;
    d1RowsRead: number;
    doRowsWritten: number;
    doRowsRead: number;
    doRequests: number;
    logLines: number;
    analyticsPoints: number;
    /** R2 operations of retention (partition archive pages, segment listing and copy-outs); 0 when absent. */
    r2ClassA?: number;
    r2ClassB?: number;
  };
  /** Per large body (above the R2 threshold): R2 operations, and the bytes kept for payload retention. */
  largeBody: { r2ClassA: number; r2ClassB: number; bytes: number; payloadRetentionDays: number };
  /**
   * Bytes an event keeps, VACUUMed page counts per row held (bench/lib/vacuumed-bytes.ts): in D1 with
   * its body until payload retention, then without it until dedupe retention; in its shard, the tombstone, kept
   * until its time partition is dropped, between one and two dedupe windows after it was received (src/claims/partitions.ts).
   */
  storage: {
    d1BytesWithBody: number;
    d1BytesWithoutBody: number;
    shardBytes: number;
    payloadRetentionDays: number;
    dedupeRetentionDays: number;
  };
  /** Share of events whose body is above the threshold, 0..1. */
  largeShare: number;
  /** The runtime's workerd CPU per event from first send until processed (local: an upper bound of what is billed). */
  cpuMsPerEvent: number;
}

export interface AllInLine {
  item: string;
  usdPerMillion: number;
}

export function allInCost(
  happyUsdPerMillion: number,
  units: LifetimeUnits,
): { lines: AllInLine[]; allInUsdPerMillion: number } {
  const { retention, largeBody, largeShare } = units;
  const storageGbMonths = (largeBody.bytes / 1e9) * (largeBody.payloadRetentionDays / 30);
  const stored = storedGbMonths(units.storage);
  const lines: AllInLine[] = [
    { item: "happy path (acceptance, relay, processing)", usdPerMillion: happyUsdPerMillion },
    {
      item: "retention (body drop, receipt and key delete, shard partition drop)",
      usdPerMillion:
        (retention.d1RowsWritten + retention.doRowsWritten) * PRICES.rowsWrittenPerMillion +
        (retention.d1RowsRead + retention.doRowsRead) * PRICES.rowsReadPerMillion +
        retention.doRequests * PRICES.durableObjectRequestPerMillion,
    },
    {
      item: "Workers Logs lines",
      usdPerMillion: (units.happy.logLines + retention.logLines) * ALL_IN_PRICES.logLinePerMillion,
    },
    {
      item: "Analytics Engine points",
      usdPerMillion: (units.happy.analyticsPoints + retention.analyticsPoints) * ALL_IN_PRICES.analyticsPointPerMillion,
    },
    {
      item: `R2 for ${(largeShare * 100).toFixed(1)} % large bodies (operations + storage)`,
      usdPerMillion:
        largeShare *
        (largeBody.r2ClassA * ALL_IN_PRICES.r2ClassAPerMillion +
          largeBody.r2ClassB * ALL_IN_PRICES.r2ClassBPerMillion +
          storageGbMonths * 1e6 * ALL_IN_PRICES.r2StoragePerGbMonth),
    },
    {
      item: "R2 operations of small bodies (segments) and retention (archive, expiry)",
      usdPerMillion:
        (units.happy.r2ClassA + (retention.r2ClassA ?? 0)) * ALL_IN_PRICES.r2ClassAPerMillion +
        (units.happy.r2ClassB + (retention.r2ClassB ?? 0)) * ALL_IN_PRICES.r2ClassBPerMillion,
    },
    {
      item: "storage over the retention windows (D1 receipt, shard tombstone)",
      usdPerMillion:
        1e6 *
        (stored.d1 * ALL_IN_PRICES.d1StoragePerGbMonth + stored.shards * ALL_IN_PRICES.durableObjectStoragePerGbMonth),
    },
    {
      item: "CPU time (local workerd, upper bound)",
      usdPerMillion: units.cpuMsPerEvent * ALL_IN_PRICES.cpuMsPerMillion,
    },
  ];
  return { lines, allInUsdPerMillion: lines.reduce((sum, line) => sum + line.usdPerMillion, 0) };
}

/**
 * GB-months one event's rows are kept. A shard's tombstone lives 1.5 dedupe windows on average: its partition
 * closes about one window after it opened and is dropped one window after that, so a claim received x into the
 * partition's window lives 2 windows minus x.
 */
export function storedGbMonths(storage: LifetimeUnits["storage"]): { d1: number; shards: number } {
  const months = (days: number) => days / 30;
  const { payloadRetentionDays: payload, dedupeRetentionDays: dedupe } = storage;
  return {
    d1:
      (storage.d1BytesWithBody * months(payload) + storage.d1BytesWithoutBody * months(Math.max(0, dedupe - payload))) /
      1e9,
    shards: (storage.shardBytes * months(1.5 * dedupe)) / 1e9,
  };
}

export function formatAllIn(cost: ReturnType<typeof allInCost>): string {
  return [
    ...cost.lines.map((line) => `${line.item.padEnd(72)}${`$${line.usdPerMillion.toFixed(2)}`.padStart(9)}`),
    `${"all in, USD per million events beyond the inclusions".padEnd(72)}${`$${cost.allInUsdPerMillion.toFixed(2)}`.padStart(9)}`,
  ].join("\n");
}
