/**
 * The meters phase: billed units per event read from the receiver's own meters (GET /admin/api/meters, which
 * sums what production code counted where it happened: D1 meta, Durable Object cursors, alarms, RPCs, queue
 * operations), before and after a run of happy-path events. Nothing here estimates a row.
 */

/** Published prices: one home, shared with the capacity model (docs/performance.md, "Prices"). */
export { PRICES } from "../../src/capacity/prices.ts";

/** What the Workers Paid plan includes each month (D1 and Durable Object SQLite rows alike). */
export const MONTHLY_INCLUSIONS = {
  workersRequests: 10_000_000,
  durableObjectRequests: 1_000_000,
  d1RowsRead: 25_000_000_000,
  d1RowsWritten: 50_000_000,
  doRowsRead: 25_000_000_000,
  doRowsWritten: 50_000_000,
  queueOperations: 1_000_000,
} as const;

import { PRICES } from "../../src/capacity/prices.ts";
import type { MeterTotals } from "../../src/lib/meter-totals.ts";

export interface PerEvent {
  /** Rows written to the receiver's own tables (the handler's effect rows are in handlerRowsWritten). */
  d1RowsWritten: number;
  d1RowsRead: number;
  d1Calls: number;
  doRowsWritten: number;
  doRowsRead: number;
  doRequests: number;
  queueOperations: number;
  handlerRowsWritten: number;
  alarmWrites: number;
  workersRequests: number;
  /** Database execution time per event (ms, meta.duration): the local SQLite's, not Cloudflare's. */
  d1DurationMs: number;
  /** Workers Logs lines and Analytics Engine points written, R2 Class A and B operations (not in usdPerMillion: see all-in.ts). */
  logLines: number;
  analyticsPoints: number;
  r2ClassA: number;
  r2ClassB: number;
}

export async function readMeters(origin: string, adminToken: string): Promise<MeterTotals> {
  const response = await fetch(`${origin}/admin/api/meters`, { headers: { authorization: `Bearer ${adminToken}` } });
  if (!response.ok) throw new Error(`GET /admin/api/meters answered ${response.status}: ${await response.text()}`);
  return ((await response.json()) as { totals: MeterTotals }).totals;
}

export function perEvent(before: MeterTotals, after: MeterTotals, events: number, workersRequests: number): PerEvent {
  const delta = (key: keyof MeterTotals) => (after[key] - before[key]) / events;
  return {
    d1RowsWritten: delta("d1RowsWritten") - delta("d1HandlerRowsWritten"),
    d1RowsRead: delta("d1RowsRead"),
    d1Calls: delta("d1Calls"),
    doRowsWritten: delta("doRowsWritten"),
    doRowsRead: delta("doRowsRead"),
    doRequests: delta("doRequests"),
    queueOperations: delta("queueOperations"),
    handlerRowsWritten: delta("d1HandlerRowsWritten"),
    alarmWrites: delta("doAlarmWrites"),
    workersRequests: workersRequests / events,
    d1DurationMs: delta("d1DurationMs"),
    logLines: delta("logLines"),
    analyticsPoints: delta("analyticsPoints"),
    r2ClassA: delta("r2ClassA"),
    r2ClassB: delta("r2ClassB"),
  };
}

/** USD per million events beyond the plan's inclusions, the handler's own effect rows not counted. */
export function usdPerMillion(per: PerEvent): number {
  return (
    per.workersRequests * PRICES.workersRequestPerMillion +
    per.doRequests * PRICES.durableObjectRequestPerMillion +
    (per.d1RowsRead + per.doRowsRead) * PRICES.rowsReadPerMillion +
    (per.d1RowsWritten + per.doRowsWritten) * PRICES.rowsWrittenPerMillion +
    per.queueOperations * PRICES.queueOperationPerMillion
  );
}

/** Events a month before any one inclusion runs out: the first meter to reach its inclusion decides. */
export function eventsWithinInclusions(per: PerEvent): { events: number; limitedBy: string } {
  const limits: [string, number][] = [
    ["Workers requests", MONTHLY_INCLUSIONS.workersRequests / per.workersRequests],
    ["Durable Object requests", MONTHLY_INCLUSIONS.durableObjectRequests / per.doRequests],
    ["D1 rows written", MONTHLY_INCLUSIONS.d1RowsWritten / (per.d1RowsWritten + per.handlerRowsWritten)],
    ["Durable Object rows written", MONTHLY_INCLUSIONS.doRowsWritten / per.doRowsWritten],
    ["queue operations", MONTHLY_INCLUSIONS.queueOperations / per.queueOperations],
  ];
  const [limitedBy, events] = limits.reduce((lowest, entry) => (entry[1] < lowest[1] ? entry : lowest));
  return { events: Math.floor(events), limitedBy };
}

/** `d1RowsBudget`: a source with one route has 3; each further matched route adds at most 2 (docs/routing.md). */
export function formatPerEvent(per: PerEvent, d1RowsBudget = "≤ 3"): string {
  const rows: [string, number, string][] = [
    ["D1 rows written (receiver tables)", per.d1RowsWritten, d1RowsBudget],
    ["D1 rows written (handler's effect)", per.handlerRowsWritten, "not budgeted"],
    ["D1 rows read", per.d1RowsRead, ""],
    ["D1 calls", per.d1Calls, "≤ 0.2"],
    ["D1 execution ms (local SQLite)", per.d1DurationMs, ""],
    ["DO rows written (alarms included)", per.doRowsWritten, "≤ 3"],
    ["  of which alarm writes", per.alarmWrites, ""],
    ["DO rows read", per.doRowsRead, ""],
    ["DO requests (RPC + alarms)", per.doRequests, "≤ 1.1"],
    ["queue operations", per.queueOperations, "≤ 0.5"],
    ["Workers requests", per.workersRequests, ""],
    ["Workers Logs lines", per.logLines, ""],
    ["Analytics Engine points", per.analyticsPoints, ""],
    ["R2 Class A / Class B operations", per.r2ClassA + per.r2ClassB, ""],
  ];
  return [
    `${"meter".padEnd(38)}${"per event".padStart(10)}  budget`,
    ...rows.map(([name, value, budget]) => `${name.padEnd(38)}${value.toFixed(3).padStart(10)}  ${budget}`),
  ].join("\n");
}
