import { sql } from "drizzle-orm";
import { shardsOf } from "../../claims/routing";
import { database } from "../../db/client";
import { loadSources, sourcesHealth } from "../../sources/registry";
import { explainHealth } from "../health/source-health";
import { NO_SAMPLES, type Percentiles } from "./percentiles";
import type { SourceStats } from "./source-stats";
import { receiptNumbers } from "./stats-rows";

export type { Percentiles } from "./percentiles";

/**
 * Per-source health over a window. What each number counts, and where it comes from (`origins` in the answer):
 *   received, processed, stale, skipped, dead, dismissed, pending, reconciled, replayed — D1 receipts received in
 *                the window (an id range: receipt ids are ULIDs minted when the delivery was received)
 *   quarantined — quarantined copies received in the window (same key, different payload): the D1 quarantine rows'
 *                `copies`, each counted from its id's time
 *   duplicates — live duplicate deliveries tallied per hour by the claim shards (hour-aligned window), because the
 *                acknowledgement path never writes D1. Asking costs one request per shard, so only a single-source
 *                report includes them; the all-sources report says null.
 *   rejectedSignatures, ackLatencyMs — not in D1 (a rejected delivery writes nothing, the ack path does no extra
 *                write). Filled from Workers Analytics Engine when it is bound and queryable, null otherwise.
 *   deadTotal, oldestPending — every delivery, whatever its age: receipts whose own delivery is dead (or waits), and
 *                further routes' deliveries (`deliveries`) that are, read through the partial indexes holding only those
 *   pickupLatencyMs — received → first attempt started (claim → relay → queue → consumer)
 *   processingLatencyMs — received → finished: the first run's, for receipts whose first run finished well
 *                (processed, stale, skipped); a replay's run is not folded in (src/db/receipt-runs.ts)
 *   attemptDurationMs — each attempt's own duration
 */

export type { SourceStats } from "./source-stats";

/** Where a number in the report came from. */
export type Origin = "d1" | "claim-shards" | "analytics-engine" | "dev-server-memory" | "not-stored";

export interface StatsReport {
  windowMs: number;
  since: number;
  generatedAt: number;
  notes: Record<string, string>;
  origins: Record<string, Origin>;
  sources: SourceStats[];
}

/** What Analytics Engine adds to a report, per source, when it is bound and queryable (see ./analytics-query.ts). */
export interface DeliveryMetrics {
  rejectedSignatures: Map<string, number>;
  ackLatencyMs: Map<string, Percentiles>;
  /** Set when the numbers are the dev server's own tally (src/lib/local-rejections.ts): rejections only. */
  origin?: "dev-server-memory";
}

export const STATS_NOTES = {
  duplicates:
    "Live duplicate deliveries counted by the claim shards, per whole hour (the window is rounded down to the hour). Only reported for a single source (?source=…): it asks each of that source's shards.",
  rejectedSignatures:
    "Not in D1: a delivery that fails verification writes nothing there. The METRICS Analytics Engine dataset counts them when bound; set METRICS_ACCOUNT_ID and METRICS_API_TOKEN to read them back here (docs/metrics.md), or count `delivery.rejected` lines in Workers Logs.",
  ackLatencyMs:
    "Not in D1: the acknowledgement path does no extra write. The METRICS Analytics Engine dataset records it when bound; set METRICS_ACCOUNT_ID and METRICS_API_TOKEN to read it back here (docs/metrics.md), or read the durationMs of each `delivery` log line in Workers Logs.",
  oldestPending:
    "The arrival of the oldest receipt with a delivery pending or processing: its own delivery, received in the window or waiting for a retry (the cron's re-drive schedules anything older), or any further route's.",
} as const;

const LOCAL_REJECTIONS_NOTE =
  "Counted by this dev server in memory (wrangler dev keeps no Analytics Engine data to read back), since it started or last reloaded; a deployed Worker counts them in the METRICS dataset (docs/metrics.md).";

async function duplicatesByHour(
  env: Env,
  sourceName: string,
  since: number,
): Promise<{ hour: number; deliveries: number }[]> {
  const perHour = new Map<number, number>();
  const perShard = await Promise.all(shardsOf(env, sourceName).map((shard) => shard.duplicateCounts(since)));
  for (const row of perShard.flat()) {
    if (row.source === sourceName) perHour.set(row.hour, (perHour.get(row.hour) ?? 0) + row.deliveries);
  }
  return [...perHour].sort(([a], [b]) => a - b).map(([hour, deliveries]) => ({ hour, deliveries }));
}

/**
 * The report behind GET /admin/api/stats and the dashboard. Each source's numbers are read from the database its
 * receipts live in (./stats-rows.ts); open alerts, which are system-wide, from `DB`.
 *
 * @example
 *   const report = await sourceStats(env, 24 * 3_600_000, { onlySource: "stripe" });
 *   report.sources[0]?.healthReasons; // [{ reason: "dead-letters", count: 2, message: "2 dead letters …" }]
 */
export async function sourceStats(
  env: Env,
  windowMs: number,
  options: { now?: number; onlySource?: string; metrics?: DeliveryMetrics | null } = {},
): Promise<StatsReport> {
  const now = options.now ?? Date.now();
  const since = now - windowMs;
  const [numbers, alertRows] = await Promise.all([
    receiptNumbers(env, since, options.onlySource),
    database(env).all<{ source: string; total: number }>(
      sql`SELECT source, COUNT(*) AS total FROM alerts WHERE state = 'open' GROUP BY source`,
    ),
  ]);

  let configured: string[] = [];
  try {
    configured = [...loadSources(env).keys()];
  } catch {
    // A broken SOURCES table must not hide the audit trail: fall back to the sources D1 knows.
  }
  const invalid = sourcesHealth(env).invalid;
  const {
    counts,
    oldestPending: pendingBySource,
    deadTotal: deadBySource,
    quarantined,
    pickup,
    processing,
    attemptDuration,
  } = numbers;
  const alertsBySource = new Map(alertRows.map((row) => [row.source ?? "", row.total]));
  const names = [
    ...new Set([
      ...configured,
      ...Object.keys(invalid),
      ...counts.keys(),
      ...pendingBySource.keys(),
      ...deadBySource.keys(),
    ]),
  ]
    .filter((name) => options.onlySource === undefined || name === options.onlySource)
    .sort();
  // Only a configured source can have live deliveries, so only its shards are asked.
  const hourlyDuplicates =
    options.onlySource !== undefined && configured.includes(options.onlySource)
      ? await duplicatesByHour(env, options.onlySource, since)
      : null;
  const metrics = options.metrics ?? null;
  const fromAnalytics = metrics !== null && metrics.origin === undefined;

  const sources = names.map((name): SourceStats => {
    const windowRow = counts.get(name);
    const oldestPending = pendingBySource.get(name) ?? null;
    const oldestPendingAgeMs = oldestPending === null ? null : Math.max(0, now - oldestPending);
    const deadTotal = deadBySource.get(name) ?? 0;
    const openAlerts = alertsBySource.get(name) ?? 0;
    const { health, reasons } = explainHealth({
      deadTotal,
      openAlerts,
      oldestPendingAgeMs,
      configProblems: invalid[name]?.length ?? 0,
    });
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
      quarantined: quarantined.get(name) ?? 0,
      duplicates: hourlyDuplicates === null ? null : hourlyDuplicates.reduce((total, row) => total + row.deliveries, 0),
      duplicatesByHour: hourlyDuplicates,
      rejectedSignatures: metrics ? (metrics.rejectedSignatures.get(name) ?? 0) : null,
      deadTotal,
      oldestPendingReceivedAt: oldestPending,
      oldestPendingAgeMs,
      openAlerts,
      ackLatencyMs: fromAnalytics ? (metrics.ackLatencyMs.get(name) ?? NO_SAMPLES) : null,
      pickupLatencyMs: pickup.get(name) ?? NO_SAMPLES,
      processingLatencyMs: processing.get(name) ?? NO_SAMPLES,
      attemptDurationMs: attemptDuration.get(name) ?? NO_SAMPLES,
      health,
      healthReasons: reasons,
    };
  });
  const notStored: Origin = fromAnalytics ? "analytics-engine" : "not-stored";
  // Under wrangler dev the rejections come from the dev server's own tally; ack latency is still not kept.
  const rejectedOrigin: Origin = metrics?.origin ?? notStored;
  return {
    windowMs,
    since,
    generatedAt: now,
    notes: fromAnalytics
      ? { duplicates: STATS_NOTES.duplicates, oldestPending: STATS_NOTES.oldestPending }
      : metrics
        ? { ...STATS_NOTES, rejectedSignatures: LOCAL_REJECTIONS_NOTE }
        : { ...STATS_NOTES },
    origins: {
      counts: "d1",
      latencies: "d1",
      duplicates: "claim-shards",
      rejectedSignatures: rejectedOrigin,
      ackLatencyMs: notStored,
    },
    sources,
  };
}
