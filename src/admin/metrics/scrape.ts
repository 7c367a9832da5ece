import { shardName, shardsOf } from "../../claims/routing";
import { shardThresholds } from "../../monitor/conditions";
import { systemMonitor } from "../../monitor/report";
import { databaseLimit } from "../../monitor/store-limits";
import { configuredSources, storageSizes } from "../health/storage-sizes";
import type { Percentiles } from "../stats/percentiles";
import type { SourceStats } from "../stats/source-stats";
import { sourceStats } from "../stats/stats";
import type { MetricFamily, Sample } from "./openmetrics";

/**
 * What GET /admin/api/metrics exposes, built from the numbers the stats and health endpoints already read, never
 * a query of its own (docs/operating.md, "Telemetry: OTLP export and the metrics endpoint"):
 *   - D1: the all-sources stats report (./../stats/stats-rows.ts: nine reads per receipt database, one of `alerts`)
 *     and each receipt database's size (one trivial query each). With `DB` alone: 11 queries per scrape.
 *   - each configured source's claim shards: two RPCs per shard (unrelayed claims, counted up to the shard backlog
 *     alert's threshold, and SQLite size); the system monitor: one RPC.
 * The receipt counts are over a trailing window, like the stats, so they are gauges: an all-time counter would
 * need a count that grows with all-time traffic. The latencies are summaries of the stats' nearest-rank
 * percentiles, because the stats keep percentiles, not histogram buckets.
 */

const PREFIX = "webhook_receiver";

/** Receipt statuses in the window, by the field of SourceStats that counts them. */
const RECEIPT_OUTCOMES = ["processed", "stale", "skipped", "dead", "dismissed", "pending"] as const;

const LATENCIES = [
  ["pickup_latency_seconds", "pickupLatencyMs", "Received to first attempt started (claim, relay, queue, consumer)"],
  ["processing_latency_seconds", "processingLatencyMs", "Received to finished, for receipts that finished well"],
  ["attempt_duration_seconds", "attemptDurationMs", "Each delivery attempt's own duration"],
] as const satisfies readonly (readonly [string, keyof SourceStats, string])[];

const QUANTILES = [
  ["0.5", "p50"],
  ["0.95", "p95"],
  ["0.99", "p99"],
  ["1", "max"],
] as const satisfies readonly (readonly [string, keyof Percentiles])[];

interface ShardFacts {
  source: string;
  shard: string;
  unrelayed: number;
  bytes: number;
}

async function shardFacts(env: Env, sources: readonly string[], backlogCap: number): Promise<ShardFacts[]> {
  return Promise.all(
    sources.flatMap((source) =>
      shardsOf(env, source).map(async (stub, index) => {
        const [unrelayed, bytes] = await Promise.all([stub.unrelayedCount(backlogCap), stub.storageBytes()]);
        return { source, shard: shardName(source, index), unrelayed, bytes };
      }),
    ),
  );
}

async function openSystemAlerts(env: Env): Promise<{ kind: string; reporters: string[] }[] | null> {
  try {
    return (await systemMonitor(env).list()).filter((alert) => alert.state === "open");
  } catch {
    return null;
  }
}

/** `route:<source>/<route>` (a route's circuit breaker) as its two labels. */
function routeOfReporter(reporter: string): { source: string; route: string } | null {
  const match = /^route:([^/]*)\/(.*)$/s.exec(reporter);
  return match ? { source: match[1]!, route: match[2]! } : null;
}

const gauge = (name: string, help: string, samples: Sample[], unit?: "seconds" | "bytes"): MetricFamily => ({
  name: `${PREFIX}_${name}`,
  type: "gauge",
  help,
  samples,
  ...(unit === undefined ? {} : { unit }),
});

export async function metricFamilies(env: Env, windowMs: number, now = Date.now()): Promise<MetricFamily[]> {
  const thresholds = shardThresholds(env);
  const [report, databases, shards, systemAlerts] = await Promise.all([
    sourceStats(env, windowMs, { now }),
    storageSizes(env, null),
    shardFacts(env, configuredSources(env), thresholds.backlog),
    openSystemAlerts(env),
  ]);
  const perSource = (pick: (stats: SourceStats) => number): Sample[] =>
    report.sources.map((stats) => ({ labels: { source: stats.source }, value: pick(stats) }));
  const d1Limit = databaseLimit(env).limitBytes;
  const window = `the last ${windowMs / 1000} s (?window=, as GET /admin/api/stats)`;

  return [
    gauge("window_seconds", "The trailing window the receipt counts and latencies cover", [
      { labels: {}, value: windowMs / 1000 },
    ]),
    gauge(
      "receipts_received",
      `Receipts received in ${window}`,
      perSource((stats) => stats.received),
    ),
    gauge(
      "receipts",
      `Receipts received in ${window}, by their delivery's outcome now (pending includes processing)`,
      report.sources.flatMap((stats) =>
        RECEIPT_OUTCOMES.map((outcome) => ({ labels: { source: stats.source, outcome }, value: stats[outcome] })),
      ),
    ),
    gauge(
      "receipts_reconciled",
      `Receipts in ${window} the reconciler found`,
      perSource((stats) => stats.reconciled),
    ),
    gauge(
      "receipts_replayed",
      `Receipts in ${window} replayed at least once`,
      perSource((stats) => stats.replayed),
    ),
    gauge(
      "quarantined_copies",
      `Copies quarantined in ${window} (same key, different payload)`,
      perSource((stats) => stats.quarantined),
    ),
    gauge(
      "dead_letters",
      "Dead deliveries waiting for an operator, whatever their age: receipts' own and further routes'",
      perSource((stats) => stats.deadTotal),
    ),
    gauge(
      "backlog_oldest_age_seconds",
      "Age of the oldest receipt with a delivery pending or processing (0 when none waits)",
      perSource((stats) => (stats.oldestPendingAgeMs ?? 0) / 1000),
      "seconds",
    ),
    gauge(
      "unrelayed_claims",
      `Claims acknowledged but not yet relayed to D1, per claim shard (counted up to ${thresholds.backlog})`,
      shards.map((shard) => ({ labels: { source: shard.source, shard: shard.shard }, value: shard.unrelayed })),
    ),
    gauge(
      "open_alerts",
      "Open alerts in D1 (silence, failures) per source",
      perSource((stats) => stats.openAlerts),
    ),
    ...LATENCIES.map(
      ([name, field, help]): MetricFamily => ({
        name: `${PREFIX}_${name}`,
        type: "summary",
        unit: "seconds",
        help: `${help}, nearest-rank quantiles over ${window}; quantile 1 is the maximum`,
        samples: report.sources.flatMap((stats) =>
          QUANTILES.flatMap(([quantile, key]) => {
            const value = stats[field][key];
            return value === null ? [] : [{ labels: { source: stats.source, quantile }, value: value / 1000 }];
          }),
        ),
      }),
    ),
    gauge(
      "monitor_up",
      "1 when the system monitor answered this scrape, 0 when it did not (its alerts below are then missing)",
      [{ labels: {}, value: systemAlerts === null ? 0 : 1 }],
    ),
    gauge(
      "system_alert_open",
      "1 per open system-monitor incident (as GET /admin/api/health lists them), by kind",
      (systemAlerts ?? []).map((alert) => ({ labels: { kind: alert.kind }, value: 1 })),
    ),
    gauge(
      "route_breaker_open",
      "1 per route whose circuit breaker is open: its deliveries are held",
      (systemAlerts ?? [])
        .filter((alert) => alert.kind === "route-breaker-open")
        .flatMap((alert) => alert.reporters.flatMap((reporter) => routeOfReporter(reporter) ?? []))
        .map((labels) => ({ labels, value: 1 })),
    ),
    gauge(
      "d1_database_bytes",
      "Each receipt database's size as D1 reports it (missing when it did not answer)",
      databases.d1Databases.flatMap((entry) =>
        entry.bytes === null ? [] : [{ labels: { database: entry.binding }, value: entry.bytes }],
      ),
      "bytes",
    ),
    gauge(
      "d1_database_limit_bytes",
      "The size at which a receipt database is no longer written (D1_SIZE_LIMIT_BYTES)",
      databases.d1Databases.map((entry) => ({ labels: { database: entry.binding }, value: d1Limit })),
      "bytes",
    ),
    gauge(
      "claim_shard_bytes",
      "Each claim shard's SQLite size",
      shards.map((shard) => ({ labels: { source: shard.source, shard: shard.shard }, value: shard.bytes })),
      "bytes",
    ),
    gauge(
      "claim_shard_limit_bytes",
      "The size at which a claim shard answers new events 503 (SHARD_SIZE_LIMIT_BYTES)",
      [{ labels: {}, value: thresholds.limitBytes }],
      "bytes",
    ),
  ];
}
