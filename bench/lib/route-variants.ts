import { FAN_OUT_SOURCE, fanOutSource } from "./fan-out.ts";
import type { startForwardBackend } from "./forward-backend.ts";
import { meterHappyPath, type PhaseContext, startMeteredRuntime } from "./happy-path.ts";
import { DEDUPE_RETENTION_DAYS, PAYLOAD_RETENTION_DAYS } from "./lifetime.ts";
import type { PerEvent } from "./meters.ts";
import { meterRetention } from "./retention.ts";
import { deploymentWithSource, type ReceiverDeployment } from "./setup.ts";
import { ReceiptStore } from "./store.ts";

/**
 * The meters of a source with three routes (docs/routing.md, "Fan-out"; bench/lib/fan-out.ts: `ledger` →
 * handler:accounts, `backend` and `audit` → the local backend, `audit` filtered to one event type), on a runtime of
 * its own: either the audit route filtered out (two matched routes, "fan-out") or taking every event ("three routes,
 * all matched", with its retention, docs/performance.md, "Cost per event"). Every meters event is
 * `account.credited`.
 */

/** Per event, a source with one route may write 3 D1 rows; each further matched route at most 2 more, and no D1 call. */
const D1_ROWS_PER_FURTHER_ROUTE = 2;
const METERS_TYPE = "account.credited";

export interface RouteVariant {
  /** The runtime's label and port offset, the events' key prefix. */
  label: string;
  portOffset: number;
  keyPrefix: string;
  /** The audit route's one type: METERS_TYPE for every route matched, another for the audit route filtered out. */
  auditType: string;
  /** Also meter its retention (the cron past both windows). */
  retention: boolean;
}

export const FAN_OUT_VARIANT: RouteVariant = {
  label: "meters-fanout",
  portOffset: 7,
  keyPrefix: "meter_fan_",
  auditType: "account.closed",
  retention: false,
};
export const ALL_ROUTES_VARIANT: RouteVariant = {
  label: "meters-routes",
  portOffset: 9,
  keyPrefix: "meter_all_",
  auditType: METERS_TYPE,
  retention: true,
};

/** One source's rows per event: its happy path and its retention, both from the runtime's meters. */
export interface SourceRows {
  source: string;
  events: number;
  happy: PerEvent;
  retention: PerEvent;
}

export async function meterRouteVariant(
  context: PhaseContext,
  deployment: ReceiverDeployment,
  stateDir: string,
  backend: Awaited<ReturnType<typeof startForwardBackend>>,
  events: number,
  concurrency: number,
  variant: RouteVariant,
) {
  const runtime = await startMeteredRuntime(
    context,
    deploymentWithSource(deployment, variant.label, FAN_OUT_SOURCE, fanOutSource(backend.port, variant.auditType)),
    stateDir,
    variant.label,
    variant.portOffset,
  );
  try {
    const auditTakes = variant.auditType === METERS_TYPE;
    const d1RowsBudget = 3 + D1_ROWS_PER_FURTHER_ROUTE * (auditTakes ? 2 : 1);
    console.log(
      `${auditTakes ? "three routes, all matched" : "fan-out"} (ledger → handler:accounts, backend → the local backend, audit → the ` +
        `local backend filtered to ${variant.auditType}, which ${auditTakes ? "every" : "no"} event is; ${events} events; ` +
        `budget ≤ ${d1RowsBudget} D1 rows):`,
    );
    const seenBefore = backend.seen().length;
    const happy = await meterHappyPath(context, runtime, deployment, {
      path: `/webhooks/${FAN_OUT_SOURCE}`,
      keyPrefix: variant.keyPrefix,
      events,
      concurrency,
      d1RowsBudget: `≤ ${d1RowsBudget}`,
      deliveries: true,
    });
    const keysByPath = new Map<string, Set<string>>();
    for (const forward of backend.seen().slice(seenBefore))
      keysByPath.set(forward.path, (keysByPath.get(forward.path) ?? new Set()).add(forward.eventKey));
    const received = (path: string) => keysByPath.get(path)?.size ?? 0;
    const routeRows = new ReceiptStore(runtime.options.persistDir).read(
      (database) =>
        database
          .prepare(
            `SELECT d.route AS route, COUNT(*) AS count FROM deliveries d JOIN receipts r ON r.id = d.receipt_id
             WHERE r.event_key LIKE ? GROUP BY d.route`,
          )
          .all(`${variant.keyPrefix}%`) as Array<{ route: string; count: number }>,
    );
    console.log(
      `the backend received ${received("/backend")} events on the backend route and ${received("/audit")} on the audit route ` +
        `for ${events} events; deliveries rows: ${routeRows.map(({ route, count }) => `${route} ${count}`).join(", ") || "none"}`,
    );
    for (const [path, expected] of [
      ["/backend", events],
      ["/audit", auditTakes ? events : 0],
    ] as const)
      if (received(path) !== expected)
        context.failures.push(`meters (${variant.label}): ${path} received ${received(path)} of ${expected} events`);
    const over = overBudget(happy.per, d1RowsBudget);
    console.log(`budget: ${over.length === 0 ? "within" : `over (${over.join("; ")})`}`);
    const retention = variant.retention
      ? await meterRetention(context, runtime, deployment, [variant.keyPrefix], events, {
          payloadDays: PAYLOAD_RETENTION_DAYS,
          dedupeDays: DEDUPE_RETENTION_DAYS,
        })
      : null;
    return {
      ...happy,
      d1RowsBudget,
      overBudget: over,
      forwardsByPath: { "/backend": received("/backend"), "/audit": received("/audit") },
      retention: retention?.perEvent ?? null,
    };
  } finally {
    await runtime.stop();
  }
}

/** The meters over a several-route source's budget: its D1 rows, and one route's calls, shard rows and queue. */
function overBudget(per: PerEvent, d1RowsBudget: number): string[] {
  return [
    per.d1RowsWritten > d1RowsBudget && `D1 rows written ${per.d1RowsWritten.toFixed(3)} > ${d1RowsBudget}`,
    per.d1Calls > 0.2 && `D1 calls ${per.d1Calls.toFixed(3)} > 0.2`,
    per.doRowsWritten > 3 && `DO rows written ${per.doRowsWritten.toFixed(3)} > 3`,
    per.doRequests > 1.1 && `DO requests ${per.doRequests.toFixed(3)} > 1.1`,
    per.queueOperations > 0.5 && `queue operations ${per.queueOperations.toFixed(3)} > 0.5`,
  ].filter((reason): reason is string => typeof reason === "string");
}

/** The sources' rows per event side by side: happy path, and all-in (happy path plus retention). */
export function formatRowsPerEvent(sources: readonly SourceRows[]): string {
  const doRows = (per: PerEvent) => per.doRowsWritten - per.alarmWrites;
  const columns: [string, (rows: SourceRows) => number][] = [
    ["D1 written, happy", (rows) => rows.happy.d1RowsWritten],
    ["D1 written, all-in", (rows) => rows.happy.d1RowsWritten + rows.retention.d1RowsWritten],
    ["D1 read, happy", (rows) => rows.happy.d1RowsRead],
    ["D1 read, all-in", (rows) => rows.happy.d1RowsRead + rows.retention.d1RowsRead],
    ["DO written, happy", (rows) => doRows(rows.happy)],
    ["DO written, all-in", (rows) => doRows(rows.happy) + doRows(rows.retention)],
    ["alarms, all-in", (rows) => rows.happy.alarmWrites + rows.retention.alarmWrites],
  ];
  return [
    "rows per event (D1: the receiver's tables; DO: the shards' rows, alarm writes apart):",
    `${"source".padEnd(28)}${"events".padStart(7)}${columns.map(([name]) => name.padStart(20)).join("")}`,
    ...sources.map(
      (rows) =>
        `${rows.source.padEnd(28)}${String(rows.events).padStart(7)}` +
        columns.map(([, value]) => value(rows).toFixed(3).padStart(20)).join(""),
    ),
  ].join("\n");
}
