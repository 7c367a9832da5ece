import { and, count, eq, gte, inArray, min, sql } from "drizzle-orm";
import { shardsOf } from "../claims/routing";
import type { Database } from "../db/client";
import { alerts, attempts, quarantine, receipts } from "../db/schema";
import { loadSources } from "../sources/registry";

/**
 * Per-source health over a window. What each number counts, and where it comes from:
 *   received, processed, stale, skipped, dead, pending, reconciled, replayed — D1 receipts received in the window
 *   quarantined — D1 quarantine rows received in the window (same key, different payload)
 *   duplicates — live duplicate deliveries tallied per hour by the claim shards (hour-aligned window), because the
 *                acknowledgement path never writes D1. Asking costs one request per shard, so only a single-source
 *                report includes them; the all-sources report says null.
 *   rejectedSignatures — not stored anywhere: a rejected delivery writes nothing (invariant 1). Count the
 *                `delivery.rejected` lines in Workers Logs instead.
 *   ackLatency — not stored either: the acknowledgement path does no extra write to time itself. It is the
 *                `durationMs` of each `delivery` log line.
 *   pickupLatency — first attempt's start minus receipt (claim → relay → queue → consumer)
 *   processingLatency — processed_at minus receipt, for receipts that finished (processed, stale, skipped)
 *   attemptDuration — each attempt's own duration
 */

export interface Percentiles {
  samples: number;
  p50: number | null;
  p95: number | null;
  p99: number | null;
  max: number | null;
}

export interface SourceStats {
  source: string;
  configured: boolean;
  received: number;
  processed: number;
  stale: number;
  skipped: number;
  dead: number;
  pending: number;
  reconciled: number;
  replayed: number;
  quarantined: number;
  duplicates: number | null;
  /** Start of each hour (epoch ms) with its live duplicate count; single-source reports only. */
  duplicatesByHour: { hour: number; deliveries: number }[] | null;
  rejectedSignatures: null;
  deadTotal: number;
  oldestPendingReceivedAt: number | null;
  oldestPendingAgeMs: number | null;
  openAlerts: number;
  ackLatencyMs: null;
  pickupLatencyMs: Percentiles;
  processingLatencyMs: Percentiles;
  attemptDurationMs: Percentiles;
  health: "ok" | "backlog" | "failing";
}

export interface StatsReport {
  windowMs: number;
  since: number;
  generatedAt: number;
  notes: Record<string, string>;
  sources: SourceStats[];
}

export const STATS_NOTES = {
  duplicates:
    "Live duplicate deliveries counted by the claim shards, per whole hour (the window is rounded down to the hour). Only reported for a single source (?source=…): it asks each of that source's shards.",
  rejectedSignatures: "Not stored: a delivery that fails verification writes nothing. Count `delivery.rejected` lines in Workers Logs.",
  ackLatencyMs: "Not stored: the acknowledgement path does no extra write. It is the durationMs of each `delivery` log line in Workers Logs.",
} as const;

/** A backlog this old makes a source unhealthy even with nothing dead. */
const BACKLOG_AGE_MS = 15 * 60_000;

const emptyPercentiles: Percentiles = { samples: 0, p50: null, p95: null, p99: null, max: null };

/**
 * Nearest-rank percentiles per source in one query: SQLite has no percentile function, so each row is ranked
 * within its source and the smallest value at or past each rank is taken.
 */
async function percentilesBySource(db: Database, valuesSql: ReturnType<typeof sql>): Promise<Map<string, Percentiles>> {
  const rows = await db.all<{ source: string; samples: number; p50: number; p95: number; p99: number; max: number }>(sql`
    WITH ranked AS (
      SELECT source, value,
        ROW_NUMBER() OVER (PARTITION BY source ORDER BY value) AS rank,
        COUNT(*) OVER (PARTITION BY source) AS samples
      FROM (${valuesSql})
    )
    SELECT source, MAX(samples) AS samples,
      MIN(CASE WHEN rank >= 0.50 * samples THEN value END) AS p50,
      MIN(CASE WHEN rank >= 0.95 * samples THEN value END) AS p95,
      MIN(CASE WHEN rank >= 0.99 * samples THEN value END) AS p99,
      MAX(value) AS max
    FROM ranked GROUP BY source`);
  return new Map(rows.map((row) => [row.source, { samples: row.samples, p50: row.p50, p95: row.p95, p99: row.p99, max: row.max }]));
}

async function duplicatesByHour(env: Env, sourceName: string, since: number): Promise<{ hour: number; deliveries: number }[]> {
  const perHour = new Map<number, number>();
  const perShard = await Promise.all(shardsOf(env, sourceName).map((shard) => shard.duplicateCounts(since)));
  for (const row of perShard.flat()) {
    if (row.source === sourceName) perHour.set(row.hour, (perHour.get(row.hour) ?? 0) + row.deliveries);
  }
  return [...perHour].sort(([a], [b]) => a - b).map(([hour, deliveries]) => ({ hour, deliveries }));
}

export async function sourceStats(
  env: Env,
  db: Database,
  windowMs: number,
  options: { now?: number; onlySource?: string } = {},
): Promise<StatsReport> {
  const now = options.now ?? Date.now();
  const since = now - windowMs;
  const statusCount = (status: string) => sql<number>`COALESCE(SUM(${receipts.status} = ${status}), 0)`.mapWith(Number);
  const provenanceCount = (provenance: string) => sql<number>`COALESCE(SUM(${receipts.provenance} = ${provenance}), 0)`.mapWith(Number);

  const [windowCounts, pendingRows, deadRows, quarantineRows, alertRows, pickup, processing, attemptDurations] = await Promise.all([
    db
      .select({
        source: receipts.source,
        received: count(),
        processed: statusCount("processed"),
        stale: statusCount("stale"),
        skipped: statusCount("skipped"),
        dead: statusCount("dead"),
        pending: sql<number>`COALESCE(SUM(${receipts.status} IN ('pending', 'processing')), 0)`.mapWith(Number),
        reconciled: provenanceCount("reconciled"),
        replayed: provenanceCount("replayed"),
      })
      .from(receipts)
      .where(gte(receipts.receivedAt, since))
      .groupBy(receipts.source),
    db
      .select({ source: receipts.source, oldest: min(receipts.receivedAt) })
      .from(receipts)
      .where(inArray(receipts.status, ["pending", "processing"]))
      .groupBy(receipts.source),
    db.select({ source: receipts.source, total: count() }).from(receipts).where(eq(receipts.status, "dead")).groupBy(receipts.source),
    db.select({ source: quarantine.source, total: count() }).from(quarantine).where(gte(quarantine.receivedAt, since)).groupBy(quarantine.source),
    db.select({ source: alerts.source, total: count() }).from(alerts).where(eq(alerts.state, "open")).groupBy(alerts.source),
    percentilesBySource(
      db,
      sql`SELECT ${receipts.source} AS source, ${attempts.startedAt} - ${receipts.receivedAt} AS value
          FROM ${receipts} JOIN ${attempts} ON ${attempts.receiptId} = ${receipts.receiptId} AND ${attempts.attemptNumber} = 1
          WHERE ${receipts.receivedAt} >= ${since}`,
    ),
    percentilesBySource(
      db,
      sql`SELECT ${receipts.source} AS source, ${receipts.processedAt} - ${receipts.receivedAt} AS value FROM ${receipts}
          WHERE ${receipts.receivedAt} >= ${since} AND ${receipts.processedAt} IS NOT NULL
            AND ${receipts.status} IN ('processed', 'stale', 'skipped')`,
    ),
    percentilesBySource(
      db,
      sql`SELECT ${receipts.source} AS source, ${attempts.durationMs} AS value
          FROM ${receipts} JOIN ${attempts} ON ${attempts.receiptId} = ${receipts.receiptId}
          WHERE ${receipts.receivedAt} >= ${since} AND ${attempts.durationMs} IS NOT NULL`,
    ),
  ]);

  let configured: string[] = [];
  try {
    configured = [...loadSources(env).keys()];
  } catch {
    // A broken SOURCES table must not hide the audit trail: fall back to the sources D1 knows.
  }
  const byName = <T extends { source: string | null }>(rows: T[]) => new Map(rows.map((row) => [row.source ?? "", row]));
  const counts = byName(windowCounts);
  const pendingBySource = byName(pendingRows);
  const deadBySource = byName(deadRows);
  const quarantineBySource = byName(quarantineRows);
  const alertsBySource = byName(alertRows);
  const names = [...new Set([...configured, ...counts.keys(), ...pendingBySource.keys(), ...deadBySource.keys()])]
    .filter((name) => options.onlySource === undefined || name === options.onlySource)
    .sort();
  // Only a configured source can have live deliveries, so only its shards are asked.
  const hourlyDuplicates =
    options.onlySource !== undefined && configured.includes(options.onlySource)
      ? await duplicatesByHour(env, options.onlySource, since)
      : null;

  const sources = names.map((name): SourceStats => {
    const windowRow = counts.get(name);
    const oldestPending = pendingBySource.get(name)?.oldest ?? null;
    const oldestPendingAgeMs = oldestPending === null ? null : Math.max(0, now - oldestPending);
    const deadTotal = deadBySource.get(name)?.total ?? 0;
    const openAlerts = alertsBySource.get(name)?.total ?? 0;
    const health =
      deadTotal > 0 || openAlerts > 0 ? "failing" : oldestPendingAgeMs !== null && oldestPendingAgeMs > BACKLOG_AGE_MS ? "backlog" : "ok";
    return {
      source: name,
      configured: configured.includes(name),
      received: windowRow?.received ?? 0,
      processed: windowRow?.processed ?? 0,
      stale: windowRow?.stale ?? 0,
      skipped: windowRow?.skipped ?? 0,
      dead: windowRow?.dead ?? 0,
      pending: windowRow?.pending ?? 0,
      reconciled: windowRow?.reconciled ?? 0,
      replayed: windowRow?.replayed ?? 0,
      quarantined: quarantineBySource.get(name)?.total ?? 0,
      duplicates: hourlyDuplicates === null ? null : hourlyDuplicates.reduce((total, row) => total + row.deliveries, 0),
      duplicatesByHour: hourlyDuplicates,
      rejectedSignatures: null,
      deadTotal,
      oldestPendingReceivedAt: oldestPending,
      oldestPendingAgeMs,
      openAlerts,
      ackLatencyMs: null,
      pickupLatencyMs: pickup.get(name) ?? emptyPercentiles,
      processingLatencyMs: processing.get(name) ?? emptyPercentiles,
      attemptDurationMs: attemptDurations.get(name) ?? emptyPercentiles,
      health,
    };
  });
  return { windowMs, since, generatedAt: now, notes: { ...STATS_NOTES }, sources };
}
