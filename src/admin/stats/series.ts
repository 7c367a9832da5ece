import { sql } from "drizzle-orm";
import { type Database, database } from "../../db/client";
import { ulidFloor } from "../../lib/ulid";
import { databasesToRead, ownEntries } from "../receipts/receipt-databases";
import { PICKUP_MS } from "./latency-sql";
import { percentilesByGroup } from "./percentiles";

/**
 * Per-source, per-hour series for the dashboard's charts: the last `hours` whole hours up to now (the current,
 * partial hour last). One pass over the receipts received in that span, by primary-key range.
 *
 *   received  receipts received in the hour
 *   processed receipts that finished as processed in the hour (by processed_at)
 *   dead      receipts that went dead in the hour (by the end of their last attempt)
 *   rejected  deliveries refused at the door: not in D1; filled from Analytics Engine when it is bound
 *   pickup / processing  p50 and p95 (ms) of the receipts received in the hour: received → first attempt, and the
 *             duration of the attempt that finished the receipt
 */

export interface HourPoint {
  /** Start of the hour, epoch ms. */
  hour: number;
  received: number;
  processed: number;
  dead: number;
  rejected: number | null;
  pickupP50: number | null;
  pickupP95: number | null;
  processingP50: number | null;
  processingP95: number | null;
  ackP50: number | null;
  ackP95: number | null;
}

export type SourceSeries = Map<string, HourPoint[]>;

export const HOUR_MS = 3_600_000;

/** Per source and hour, from Analytics Engine: rejected deliveries and ack latency. */
export type HourlyMetrics = Map<
  string,
  Map<number, { rejected: number; ackP50: number | null; ackP95: number | null }>
>;

type SeriesOptions = { now?: number; hours?: number; onlySource?: string; metrics?: HourlyMetrics | null };

/**
 * The series of every receipt database (the one source's own when `onlySource` is given), each source's from the
 * database it lives in; with `DB` alone, exactly `hourlySeries` over it.
 *
 * @example
 *   const series = await sourceSeries(env, { onlySource: "stripe" });
 */
export async function sourceSeries(env: Env, options: SeriesOptions = {}): Promise<SourceSeries> {
  const now = options.now ?? Date.now();
  const perDatabase = await Promise.all(
    databasesToRead(env, options.onlySource).map(async ({ binding, env: databaseEnv }) => ({
      binding,
      entries: await hourlySeries(database(databaseEnv), { ...options, now }),
    })),
  );
  return ownEntries(env, perDatabase, joinHours);
}

/**
 * Two databases' hours of one partitioned source: the counts add up; latencies are the hour's from the database that
 * has them (an hour lies in one partition period), and the rejections and ack latency are the same Analytics Engine
 * numbers in both.
 */
function joinHours(a: HourPoint[], b: HourPoint[]): HourPoint[] {
  return a.map((point, index) => {
    const other = b[index]!;
    return {
      ...point,
      received: point.received + other.received,
      processed: point.processed + other.processed,
      dead: point.dead + other.dead,
      pickupP50: point.pickupP50 ?? other.pickupP50,
      pickupP95: point.pickupP95 ?? other.pickupP95,
      processingP50: point.processingP50 ?? other.processingP50,
      processingP95: point.processingP95 ?? other.processingP95,
    };
  });
}

/**
 * One database's series.
 *
 * @example
 *   const series = await hourlySeries(database(env), { onlySource: "stripe" });
 *   series.get("stripe")?.at(-1)?.received; // receipts received so far this hour
 */
export async function hourlySeries(db: Database, options: SeriesOptions = {}): Promise<SourceSeries> {
  const now = options.now ?? Date.now();
  const hours = options.hours ?? 24;
  const firstHour = Math.floor(now / HOUR_MS) * HOUR_MS - (hours - 1) * HOUR_MS;
  const range =
    options.onlySource === undefined
      ? sql`r.id >= ${ulidFloor(firstHour)}`
      : sql`r.id >= ${ulidFloor(firstHour)} AND +r.source = ${options.onlySource}`;
  // A dead receipt has no finish time of its own: its last attempt's end, or its arrival (the dead-letter queue).
  const diedAt = "COALESCE(r.attempt_started_at + COALESCE(r.attempt_duration_ms, 0), r.received_at)";
  // Integer division, written into the SQL so that it stays integer (a bound number could arrive as a REAL).
  const hourOf = (column: string) => sql.raw(`(((${column}) / ${HOUR_MS}) * ${HOUR_MS})`);

  const [arrivals, outcomes, pickup, processing] = await Promise.all([
    db.all<{ source: string; hour: number; total: number }>(
      sql`SELECT r.source AS source, ${hourOf("r.received_at")} AS hour, COUNT(*) AS total FROM receipts r WHERE ${range} GROUP BY 1, 2`,
    ),
    db.all<{ source: string; hour: number; processed: number; dead: number }>(sql`
      SELECT r.source AS source,
        ${hourOf(`CASE WHEN r.status = 'dead' THEN ${diedAt} ELSE r.processed_at END`)} AS hour,
        SUM(r.status = 'processed') AS processed, SUM(r.status = 'dead') AS dead
      FROM receipts r WHERE ${range} AND (r.status = 'dead' OR (r.status = 'processed' AND r.processed_at IS NOT NULL)) GROUP BY 1, 2`),
    percentilesByGroup(
      db,
      sql`SELECT r.source || ' ' || ${hourOf("r.received_at")} AS grp, ${PICKUP_MS} AS value FROM receipts r WHERE ${range}`,
    ),
    percentilesByGroup(
      db,
      sql`SELECT r.source || ' ' || ${hourOf("r.received_at")} AS grp, r.attempt_duration_ms AS value FROM receipts r
          WHERE ${range} AND r.status IN ('processed', 'stale', 'skipped')`,
    ),
  ]);

  const series: SourceSeries = new Map();
  const pointFor = (source: string, hour: number): HourPoint | undefined => {
    if (hour < firstHour || hour > now) return undefined;
    let points = series.get(source);
    if (!points) {
      points = Array.from({ length: hours }, (_, index) =>
        emptyPoint(firstHour + index * HOUR_MS, options.metrics ? 0 : null),
      );
      series.set(source, points);
    }
    return points[Math.round((hour - firstHour) / HOUR_MS)];
  };
  for (const row of arrivals) {
    const point = pointFor(row.source, row.hour);
    if (point) point.received = row.total;
  }
  for (const row of outcomes) {
    const point = pointFor(row.source, row.hour);
    if (!point) continue;
    point.processed += row.processed;
    point.dead += row.dead;
  }
  for (const [key, value] of pickup) {
    const [source, hour] = splitKey(key);
    const point = pointFor(source, hour);
    if (point) [point.pickupP50, point.pickupP95] = [value.p50, value.p95];
  }
  for (const [key, value] of processing) {
    const [source, hour] = splitKey(key);
    const point = pointFor(source, hour);
    if (point) [point.processingP50, point.processingP95] = [value.p50, value.p95];
  }
  for (const [source, byHour] of options.metrics ?? []) {
    if (options.onlySource !== undefined && source !== options.onlySource) continue;
    for (const [hour, metrics] of byHour) {
      const point = pointFor(source, hour);
      if (point) Object.assign(point, { rejected: metrics.rejected, ackP50: metrics.ackP50, ackP95: metrics.ackP95 });
    }
  }
  return series;
}

/** Every hour of the span, for a source with nothing recorded yet. */
export function emptySeries(now: number, hours = 24, rejected: number | null = null): HourPoint[] {
  const firstHour = Math.floor(now / HOUR_MS) * HOUR_MS - (hours - 1) * HOUR_MS;
  return Array.from({ length: hours }, (_, index) => emptyPoint(firstHour + index * HOUR_MS, rejected));
}

function emptyPoint(hour: number, rejected: number | null): HourPoint {
  return {
    hour,
    received: 0,
    processed: 0,
    dead: 0,
    rejected,
    pickupP50: null,
    pickupP95: null,
    processingP50: null,
    processingP95: null,
    ackP50: null,
    ackP95: null,
  };
}

function splitKey(key: string): [string, number] {
  const space = key.lastIndexOf(" ");
  return [key.slice(0, space), Number(key.slice(space + 1))];
}
