import { sql } from "drizzle-orm";
import { shardsOf } from "../claims/routing";
import type { Database } from "../db/client";
import { ulidFloor } from "../lib/ulid";
import { loadSources, sourcesHealth } from "../sources/registry";
import { explainHealth, type Health, type HealthReason } from "./health";
import { attemptDurations, END_TO_END_MS, PICKUP_MS } from "./latency-sql";
import { NO_SAMPLES, percentilesByGroup, type Percentiles } from "./percentiles";

export type { Percentiles } from "./percentiles";

/**
 * Per-source health over a window. What each number counts, and where it comes from (`origins` in the answer):
 *   received, processed, stale, skipped, dead, dismissed, pending, reconciled, replayed — D1 receipts received in
 *                the window (an id range: receipt ids are ULIDs minted when the delivery was received)
 *   quarantined — D1 quarantine rows received in the window (same key, different payload)
 *   duplicates — live duplicate deliveries tallied per hour by the claim shards (hour-aligned window), because the
 *                acknowledgement path never writes D1. Asking costs one request per shard, so only a single-source
 *                report includes them; the all-sources report says null.
 *   rejectedSignatures, ackLatencyMs — not in D1 (a rejected delivery writes nothing, the ack path does no extra
 *                write). Filled from Workers Analytics Engine when it is bound and queryable, null otherwise.
 *   pickupLatencyMs — received → first attempt started (claim → relay → queue → consumer)
 *   processingLatencyMs — received → finished, for receipts that finished (processed, stale, skipped)
 *   attemptDurationMs — each attempt's own duration
 */

export interface SourceStats {
  source: string;
  configured: boolean;
  received: number;
  processed: number;
  stale: number;
  skipped: number;
  dead: number;
  /** Dead letters an operator dismissed (the cause was fixed, or they are not worth replaying). */
  dismissed: number;
  pending: number;
  reconciled: number;
  replayed: number;
  quarantined: number;
  duplicates: number | null;
  /** Start of each hour (epoch ms) with its live duplicate count; single-source reports only. */
  duplicatesByHour: { hour: number; deliveries: number }[] | null;
  rejectedSignatures: number | null;
  deadTotal: number;
  oldestPendingReceivedAt: number | null;
  oldestPendingAgeMs: number | null;
  openAlerts: number;
  ackLatencyMs: Percentiles | null;
  pickupLatencyMs: Percentiles;
  processingLatencyMs: Percentiles;
  attemptDurationMs: Percentiles;
  health: Health;
  /** Why the health is what it is: empty when "ok". */
  healthReasons: HealthReason[];
}

/** Where a number in the report came from. */
export type Origin = "d1" | "claim-shards" | "analytics-engine" | "not-stored";

export interface StatsReport {
  windowMs: number;
  since: number;
  generatedAt: number;
  notes: Record<string, string>;
  origins: Record<string, Origin>;
  sources: SourceStats[];
}

/** What Analytics Engine adds to a report, per source, when it is bound and queryable (see ./metrics-query.ts). */
export interface DeliveryMetrics {
  rejectedSignatures: Map<string, number>;
  ackLatencyMs: Map<string, Percentiles>;
}

export const STATS_NOTES = {
  duplicates:
    "Live duplicate deliveries counted by the claim shards, per whole hour (the window is rounded down to the hour). Only reported for a single source (?source=…): it asks each of that source's shards.",
  rejectedSignatures:
    "Not in D1: a delivery that fails verification writes nothing there. The METRICS Analytics Engine dataset counts them when bound; set METRICS_ACCOUNT_ID and METRICS_API_TOKEN to read them back here (docs/metrics.md), or count `delivery.rejected` lines in Workers Logs.",
  ackLatencyMs:
    "Not in D1: the acknowledgement path does no extra write. The METRICS Analytics Engine dataset records it when bound; set METRICS_ACCOUNT_ID and METRICS_API_TOKEN to read it back here (docs/metrics.md), or read the durationMs of each `delivery` log line in Workers Logs.",
  oldestPending:
    "The oldest pending or processing receipt received in the window or waiting for a retry (the cron's re-drive schedules anything older).",
} as const;

async function duplicatesByHour(env: Env, sourceName: string, since: number): Promise<{ hour: number; deliveries: number }[]> {
  const perHour = new Map<number, number>();
  const perShard = await Promise.all(shardsOf(env, sourceName).map((shard) => shard.duplicateCounts(since)));
  for (const row of perShard.flat()) {
    if (row.source === sourceName) perHour.set(row.hour, (perHour.get(row.hour) ?? 0) + row.deliveries);
  }
  return [...perHour].sort(([a], [b]) => a - b).map(([hour, deliveries]) => ({ hour, deliveries }));
}

/** The per-source counts one window query returns: the part of SourceStats that is counted from receipts. */
type WindowCounts = Pick<
  SourceStats,
  "source" | "received" | "processed" | "stale" | "skipped" | "dead" | "dismissed" | "pending" | "reconciled" | "replayed"
>;

/**
 * The report behind GET /admin/api/stats and the dashboard. Every D1 read is a primary-key range (receipt and
 * quarantine ids are ULIDs, so "received since" is "id ≥ the smallest id of that instant") or one of the
 * receipts table's partial indexes (dead letters, scheduled retries).
 *
 * @example
 *   const report = await sourceStats(env, database(env), 24 * 3_600_000, { onlySource: "stripe" });
 *   report.sources[0]?.healthReasons; // [{ reason: "dead-letters", count: 2, message: "2 dead letters …" }]
 */
export async function sourceStats(
  env: Env,
  db: Database,
  windowMs: number,
  options: { now?: number; onlySource?: string; metrics?: DeliveryMetrics | null } = {},
): Promise<StatsReport> {
  const now = options.now ?? Date.now();
  const since = now - windowMs;
  const fromId = ulidFloor(since);
  const inWindow = options.onlySource === undefined ? sql`r.id >= ${fromId}` : sql`r.id >= ${fromId} AND +r.source = ${options.onlySource}`;
  // `+r.source` keeps SQLite on the id range: the (source, event_key) index would read the source's whole history.
  const bySource = (column: string) => sql.raw(`r.source AS ${column}`);

  const [windowCounts, pendingRows, deadRows, quarantineRows, alertRows, pickup, processing, attemptDuration] = await Promise.all([
    db.all<WindowCounts>(sql`
      SELECT r.source AS source, COUNT(*) AS received,
        COALESCE(SUM(r.status = 'processed'), 0) AS processed, COALESCE(SUM(r.status = 'stale'), 0) AS stale,
        COALESCE(SUM(r.status = 'skipped'), 0) AS skipped, COALESCE(SUM(r.status = 'dead'), 0) AS dead,
        COALESCE(SUM(r.status = 'dismissed'), 0) AS dismissed,
        COALESCE(SUM(r.status IN ('pending', 'processing')), 0) AS pending,
        COALESCE(SUM(r.provenance = 'reconciled'), 0) AS reconciled,
        COALESCE(SUM(r.replay_count > 0 OR r.provenance = 'replayed'), 0) AS replayed
      FROM receipts r WHERE ${inWindow} GROUP BY r.source`),
    // Unfinished work: what arrived in the window, plus anything waiting for a retry (the partial index
    // receipts_retrying). Work older than the window that was never retried is re-driven by the cron, which
    // schedules it, so it shows up here within a cron period.
    db.all<{ source: string; oldest: number }>(sql`
      SELECT source, MIN(received_at) AS oldest FROM (
        SELECT r.source, r.received_at FROM receipts r WHERE ${inWindow} AND r.status IN ('pending', 'processing')
        UNION ALL
        SELECT r.source, r.received_at FROM receipts r WHERE r.next_attempt_at IS NOT NULL AND r.status IN ('pending', 'processing')
      ) GROUP BY source`),
    // Covered by the partial index receipts_dead (source, id) WHERE status = 'dead'.
    db.all<{ source: string; total: number; newest: string }>(sql`SELECT source, COUNT(*) AS total, MAX(id) AS newest FROM receipts WHERE status = 'dead' GROUP BY source`),
    db.all<{ source: string; total: number }>(sql`SELECT source, COUNT(*) AS total FROM quarantine WHERE id >= ${fromId} GROUP BY source`),
    db.all<{ source: string; total: number }>(sql`SELECT source, COUNT(*) AS total FROM alerts WHERE state = 'open' GROUP BY source`),
    percentilesByGroup(db, sql`SELECT ${bySource("grp")}, ${PICKUP_MS} AS value FROM receipts r WHERE ${inWindow}`),
    percentilesByGroup(db, sql`SELECT ${bySource("grp")}, ${END_TO_END_MS} AS value FROM receipts r WHERE ${inWindow}`),
    percentilesByGroup(db, attemptDurations(bySource("grp"), inWindow)),
  ]);

  let configured: string[] = [];
  try {
    configured = [...loadSources(env).keys()];
  } catch {
    // A broken SOURCES table must not hide the audit trail: fall back to the sources D1 knows.
  }
  const invalid = sourcesHealth(env).invalid;
  const byName = <T extends { source: string | null }>(rows: T[]) => new Map(rows.map((row) => [row.source ?? "", row]));
  const counts = byName(windowCounts);
  const pendingBySource = byName(pendingRows);
  const deadBySource = byName(deadRows);
  const quarantineBySource = byName(quarantineRows);
  const alertsBySource = byName(alertRows);
  const names = [...new Set([...configured, ...Object.keys(invalid), ...counts.keys(), ...pendingBySource.keys(), ...deadBySource.keys()])]
    .filter((name) => options.onlySource === undefined || name === options.onlySource)
    .sort();
  // Only a configured source can have live deliveries, so only its shards are asked.
  const hourlyDuplicates =
    options.onlySource !== undefined && configured.includes(options.onlySource)
      ? await duplicatesByHour(env, options.onlySource, since)
      : null;
  const metrics = options.metrics ?? null;

  const sources = names.map((name): SourceStats => {
    const windowRow = counts.get(name);
    const oldestPending = pendingBySource.get(name)?.oldest ?? null;
    const oldestPendingAgeMs = oldestPending === null ? null : Math.max(0, now - oldestPending);
    const deadRow = deadBySource.get(name);
    const deadTotal = deadRow?.total ?? 0;
    const openAlerts = alertsBySource.get(name)?.total ?? 0;
    const { health, reasons } = explainHealth({ deadTotal, openAlerts, oldestPendingAgeMs, configProblems: invalid[name]?.length ?? 0 });
    return {
      source: name,
      configured: configured.includes(name),
      received: windowRow?.received ?? 0,
      processed: windowRow?.processed ?? 0,
      stale: windowRow?.stale ?? 0,
      skipped: windowRow?.skipped ?? 0,
      dead: windowRow?.dead ?? 0,
      dismissed: windowRow?.dismissed ?? 0,
      pending: windowRow?.pending ?? 0,
      reconciled: windowRow?.reconciled ?? 0,
      replayed: windowRow?.replayed ?? 0,
      quarantined: quarantineBySource.get(name)?.total ?? 0,
      duplicates: hourlyDuplicates === null ? null : hourlyDuplicates.reduce((total, row) => total + row.deliveries, 0),
      duplicatesByHour: hourlyDuplicates,
      rejectedSignatures: metrics ? (metrics.rejectedSignatures.get(name) ?? 0) : null,
      deadTotal,
      oldestPendingReceivedAt: oldestPending,
      oldestPendingAgeMs,
      openAlerts,
      ackLatencyMs: metrics ? (metrics.ackLatencyMs.get(name) ?? NO_SAMPLES) : null,
      pickupLatencyMs: pickup.get(name) ?? NO_SAMPLES,
      processingLatencyMs: processing.get(name) ?? NO_SAMPLES,
      attemptDurationMs: attemptDuration.get(name) ?? NO_SAMPLES,
      health,
      healthReasons: reasons,
    };
  });
  const notStored: Origin = metrics ? "analytics-engine" : "not-stored";
  return {
    windowMs,
    since,
    generatedAt: now,
    notes: metrics ? { duplicates: STATS_NOTES.duplicates, oldestPending: STATS_NOTES.oldestPending } : { ...STATS_NOTES },
    origins: {
      counts: "d1",
      latencies: "d1",
      duplicates: "claim-shards",
      rejectedSignatures: notStored,
      ackLatencyMs: notStored,
    },
    sources,
  };
}
