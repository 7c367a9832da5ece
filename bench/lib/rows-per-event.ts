import { FAN_OUT_SOURCE, fanOutSource } from "./fan-out.ts";
import type { startForwardBackend } from "./forward-backend.ts";
import { meterHappyPath, type PhaseContext, startMeteredRuntime } from "./happy-path.ts";
import { DEDUPE_RETENTION_DAYS, meterRetention, PAYLOAD_RETENTION_DAYS } from "./lifetime.ts";
import type { PerEvent } from "./meters.ts";
import { deploymentWithSource, type ReceiverDeployment } from "./setup.ts";

/**
 * Rows per event for a source whose three routes all match every event (docs/performance.md, "One delivery model:
 * rows per event"): the fan-out source with its audit route taking `account.credited`, the meters events' only type,
 * so the ledger handler and both forwards deliver each event. Its happy path, then its retention, on a runtime of
 * its own; set beside the demo source's (one route) from the same run by `formatRowsPerEvent`.
 */

const ALL_ROUTES_TYPE = "account.credited";

/** One source's rows per event: its happy path and its retention, both from the runtime's meters. */
export interface SourceRows {
  source: string;
  events: number;
  happy: PerEvent;
  retention: PerEvent;
}

export async function meterAllRoutesMatched(
  context: PhaseContext,
  deployment: ReceiverDeployment,
  stateDir: string,
  backend: Awaited<ReturnType<typeof startForwardBackend>>,
  events: number,
  concurrency: number,
): Promise<SourceRows> {
  const runtime = await startMeteredRuntime(
    context,
    deploymentWithSource(deployment, "meters-routes", FAN_OUT_SOURCE, fanOutSource(backend.port, ALL_ROUTES_TYPE)),
    stateDir,
    "meters-routes",
    9,
  );
  try {
    console.log(
      `three routes, all matched (ledger → handler:accounts, backend and audit → the local backend, audit filtered to ` +
        `${ALL_ROUTES_TYPE}, which every event is; ${events} events):`,
    );
    const seenBefore = backend.seen().length;
    const happy = await meterHappyPath(context, runtime, deployment, {
      path: `/webhooks/${FAN_OUT_SOURCE}`,
      keyPrefix: "meter_all_",
      events,
      concurrency,
      d1RowsBudget: "",
      deliveries: true,
    });
    for (const path of ["/backend", "/audit"]) {
      const received = new Set(
        backend
          .seen()
          .slice(seenBefore)
          .filter((forward) => forward.path === path)
          .map((forward) => forward.eventKey),
      ).size;
      if (received < events)
        context.failures.push(`meters (three routes): ${path} received ${received} of ${events} events`);
    }
    const retention = await meterRetention(context, runtime, deployment, ["meter_all_"], events, {
      payloadDays: PAYLOAD_RETENTION_DAYS,
      dedupeDays: DEDUPE_RETENTION_DAYS,
    });
    return { source: "three routes, all matched", events, happy: happy.per, retention: retention.perEvent };
  } finally {
    await runtime.stop();
  }
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
