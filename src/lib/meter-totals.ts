/**
 * The meter's units and the arithmetic on readings, free of any runtime type, so the Worker (src/lib/meter.ts) and
 * the Node-side bench share one definition.
 */

export interface MeterTotals {
  d1Calls: number;
  d1RowsRead: number;
  d1RowsWritten: number;
  /** Of d1RowsWritten: rows written by in-Worker handlers' own statements (their effect), not the receiver's tables. */
  d1HandlerRowsWritten: number;
  /** Time the database spent executing, from each result's meta.duration (ms): what bounds one database's rate. */
  d1DurationMs: number;
  doRowsRead: number;
  /** SQLite rows written by Durable Objects, alarm writes included (Cloudflare bills each setAlarm as a row). */
  doRowsWritten: number;
  /** Of doRowsWritten: setAlarm and deleteAlarm calls. */
  doAlarmWrites: number;
  /** RPC calls into a Durable Object and alarm invocations. */
  doRequests: number;
  /** Writes, reads and deletes, one each per 64 KB of a message. */
  queueOperations: number;
  /** Lines handed to Workers Logs (console.log / console.error through src/lib/log.ts). */
  logLines: number;
  /** Data points written to Workers Analytics Engine (only when the METRICS binding is configured). */
  analyticsPoints: number;
  /** R2 Class A operations (a put per large body) and Class B (a get per large body read back); deletes are free. */
  r2ClassA: number;
  r2ClassB: number;
}

export interface MeterReading {
  isolateId: string;
  totals: MeterTotals;
}

export const ZERO_TOTALS: Readonly<MeterTotals> = Object.freeze({
  d1Calls: 0,
  d1RowsRead: 0,
  d1RowsWritten: 0,
  d1HandlerRowsWritten: 0,
  d1DurationMs: 0,
  doRowsRead: 0,
  doRowsWritten: 0,
  doAlarmWrites: 0,
  doRequests: 0,
  queueOperations: 0,
  logLines: 0,
  analyticsPoints: 0,
  r2ClassA: 0,
  r2ClassB: 0,
});

/** Adds readings from several places, each isolate once. */
export function sumReadings(readings: readonly MeterReading[]): MeterTotals {
  const seen = new Map<string, MeterTotals>();
  for (const reading of readings) seen.set(reading.isolateId, reading.totals);
  const sum: MeterTotals = { ...ZERO_TOTALS };
  for (const each of seen.values()) {
    for (const key of Object.keys(sum) as (keyof MeterTotals)[]) sum[key] += each[key];
  }
  return sum;
}

export function difference(after: MeterTotals, before: MeterTotals): MeterTotals {
  const delta: MeterTotals = { ...ZERO_TOTALS };
  for (const key of Object.keys(delta) as (keyof MeterTotals)[]) delta[key] = after[key] - before[key];
  return delta;
}
