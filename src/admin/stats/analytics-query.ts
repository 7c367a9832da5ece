import { localRejections } from "../../lib/local-rejections";
import { secretValue } from "../../lib/secrets";
import type { HourlyMetrics } from "./series";
import type { DeliveryMetrics } from "./stats";

/**
 * Reading the METRICS Analytics Engine dataset back, for the stats API and the charts. Analytics Engine is
 * queried over Cloudflare's SQL API, not through the binding, so it needs three settings besides the binding:
 * METRICS_ACCOUNT_ID (var), METRICS_API_TOKEN (secret: an API token with Account Analytics read) and, when the
 * dataset is not named `webhook_receiver_metrics`, METRICS_DATASET (var). Without all of them the report says
 * these numbers are not stored; with them, a failed query says so too (and the rest of the report still answers).
 * docs/metrics.md has the same queries to run by hand.
 */

const DEFAULT_DATASET = "webhook_receiver_metrics";
const DATASET_NAME = /^[A-Za-z0-9_]{1,64}$/;
export const SOURCE_NAME = /^[A-Za-z0-9._-]{1,128}$/;

interface QuerySettings {
  accountId: string;
  token: string;
  dataset: string;
}

/** The settings, or null when the dataset is not bound or cannot be queried from here. */
export function metricsQuerySettings(env: object): QuerySettings | null {
  if (!("METRICS" in env) || !(env as { METRICS?: unknown }).METRICS) return null;
  const accountId = secretValue(env, "METRICS_ACCOUNT_ID");
  const token = secretValue(env, "METRICS_API_TOKEN");
  const dataset = secretValue(env, "METRICS_DATASET") ?? DEFAULT_DATASET;
  if (!accountId || !token || !DATASET_NAME.test(dataset)) return null;
  return { accountId, token, dataset };
}

export async function query<T>(settings: QuerySettings, sqlText: string, fetcher: typeof fetch): Promise<T[]> {
  const response = await fetcher(
    `https://api.cloudflare.com/client/v4/accounts/${encodeURIComponent(settings.accountId)}/analytics_engine/sql`,
    {
      method: "POST",
      headers: { authorization: `Bearer ${settings.token}` },
      body: `${sqlText} FORMAT JSON`,
      signal: AbortSignal.timeout(5_000),
    },
  );
  if (!response.ok) throw new Error(`Analytics Engine SQL API answered ${response.status}`);
  return ((await response.json()) as { data?: T[] }).data ?? [];
}

/**
 * The SQL behind both numbers; `hours` back from now, optionally one source. Exported for docs/metrics.md's test.
 * A delivery point counts double2 deliveries (src/lib/delivery-tally.ts), so counts are SUM(_sample_interval *
 * double2); its double1 is one sampled latency, which the weighted quantiles read, and double3 the slowest it counts.
 */
export function metricsSql(
  dataset: string,
  hours: number,
  source?: string,
  windowHours = hours,
): { rejected: string; ack: string; ackWindow: string } {
  const where = `timestamp > NOW() - INTERVAL '${Math.max(1, Math.floor(hours))}' HOUR AND blob1 = 'delivery'${source ? ` AND index1 = '${source}'` : ""}`;
  return {
    rejected: `SELECT blob2 AS source, toStartOfInterval(timestamp, INTERVAL '1' HOUR) AS hour, SUM(_sample_interval * double2) AS rejected
FROM ${dataset} WHERE ${where} AND blob3 = 'rejected' GROUP BY source, hour ORDER BY source, hour`,
    ack: `SELECT blob2 AS source, toStartOfInterval(timestamp, INTERVAL '1' HOUR) AS hour, SUM(_sample_interval * double2) AS deliveries,
  quantileWeighted(0.5, double1, _sample_interval) AS p50, quantileWeighted(0.95, double1, _sample_interval) AS p95,
  quantileWeighted(0.99, double1, _sample_interval) AS p99, MAX(double3) AS max
FROM ${dataset} WHERE ${where} AND blob3 IN ('accepted', 'duplicate', 'quarantined') GROUP BY source, hour ORDER BY source, hour`,
    ackWindow: `SELECT blob2 AS source, SUM(_sample_interval * double2) AS deliveries,
  quantileWeighted(0.5, double1, _sample_interval) AS p50, quantileWeighted(0.95, double1, _sample_interval) AS p95,
  quantileWeighted(0.99, double1, _sample_interval) AS p99, MAX(double3) AS max
FROM ${dataset} WHERE ${where.replace(`'${Math.max(1, Math.floor(hours))}' HOUR`, `'${Math.max(1, Math.ceil(windowHours))}' HOUR`)} AND blob3 IN ('accepted', 'duplicate', 'quarantined') GROUP BY source ORDER BY source`,
  };
}

export interface MetricsReadout {
  totals: DeliveryMetrics;
  hourly: HourlyMetrics;
}

/**
 * Rejected deliveries and ack latency per source, over the window and per hour. Null when not configured;
 * throws when configured but the query failed (the caller reports that instead of the numbers).
 *
 * @example
 *   const readout = await readDeliveryMetrics(env, 24 * 3_600_000).catch(() => null);
 */
export async function readDeliveryMetrics(
  env: object,
  windowMs: number,
  source?: string,
  fetcher: typeof fetch = fetch,
): Promise<MetricsReadout | null> {
  const settings = metricsQuerySettings(env);
  if (!settings) return null;
  if (source !== undefined && !SOURCE_NAME.test(source)) return null;
  // Hourly series cover the charts' 24 hours (or the window, if longer); window totals cover the window.
  const windowHours = windowMs / 3_600_000;
  const hours = Math.ceil(Math.max(windowHours, 24));
  const statements = metricsSql(settings.dataset, hours, source, windowHours);
  type Row = {
    source: string;
    hour: string;
    rejected?: number;
    deliveries?: number;
    p50?: number;
    p95?: number;
    p99?: number;
    max?: number;
  };
  const [rejectedRows, ackRows, ackWindowRows] = await Promise.all([
    query<Row>(settings, statements.rejected, fetcher),
    query<Row>(settings, statements.ack, fetcher),
    query<Row>(settings, statements.ackWindow, fetcher),
  ]);
  const since = Date.now() - windowMs;
  const hourOf = (text: string) => Date.parse(`${text.replace(" ", "T")}Z`);
  const totals: DeliveryMetrics = { rejectedSignatures: new Map(), ackLatencyMs: new Map() };
  const hourly: HourlyMetrics = new Map();
  const slot = (row: Row) => {
    const byHour = hourly.get(row.source) ?? new Map();
    hourly.set(row.source, byHour);
    const hour = hourOf(row.hour);
    const entry = byHour.get(hour) ?? { rejected: 0, ackP50: null, ackP95: null };
    byHour.set(hour, entry);
    return { hour, entry };
  };
  for (const row of rejectedRows) {
    const { hour, entry } = slot(row);
    entry.rejected = Number(row.rejected ?? 0);
    if (hour + 3_600_000 > since)
      totals.rejectedSignatures.set(row.source, (totals.rejectedSignatures.get(row.source) ?? 0) + entry.rejected);
  }
  for (const row of ackRows) {
    const { entry } = slot(row);
    entry.ackP50 = row.p50 ?? null;
    entry.ackP95 = row.p95 ?? null;
  }
  for (const row of ackWindowRows) {
    const value = (field: number | undefined) => (field === undefined || field === null ? null : Number(field));
    totals.ackLatencyMs.set(row.source, {
      samples: Number(row.deliveries ?? 0),
      p50: value(row.p50),
      p95: value(row.p95),
      p99: value(row.p99),
      max: value(row.max),
    });
  }
  return { totals, hourly };
}

/**
 * Under wrangler dev (no Analytics Engine to query): the rejections the dev server counted itself, per hour and
 * over the window; no ack latency. Null anywhere else.
 */
function localReadout(env: object, windowMs: number, source?: string): MetricsReadout | null {
  const now = Date.now();
  const since = now - windowMs;
  const counted = localRejections(env, Math.min(since, now - 24 * 3_600_000), source);
  if (!counted) return null;
  const totals: DeliveryMetrics = {
    rejectedSignatures: new Map(),
    ackLatencyMs: new Map(),
    origin: "dev-server-memory",
  };
  const hourly: HourlyMetrics = new Map();
  for (const [name, byHour] of counted) {
    hourly.set(name, new Map([...byHour].map(([hour, rejected]) => [hour, { rejected, ackP50: null, ackP95: null }])));
    totals.rejectedSignatures.set(
      name,
      [...byHour].filter(([hour]) => hour + 3_600_000 > since).reduce((sum, [, rejected]) => sum + rejected, 0),
    );
  }
  return { totals, hourly };
}

/** The readout, or why there is none: for the report's notes. Never throws. */
export async function deliveryMetricsFor(
  env: object,
  windowMs: number,
  source?: string,
): Promise<{ readout: MetricsReadout | null; note: string | null }> {
  try {
    return {
      readout: (await readDeliveryMetrics(env, windowMs, source)) ?? localReadout(env, windowMs, source),
      note: null,
    };
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    return {
      readout: null,
      note: `The METRICS dataset is bound but could not be queried (${reason.slice(0, 200)}); rejected deliveries and ack latency are missing from this answer.`,
    };
  }
}
