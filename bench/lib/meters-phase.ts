import { FAN_OUT_SOURCE, fanOutSource } from "./fan-out.ts";
import type { BenchFlags } from "./flags.ts";
import { startForwardBackend } from "./forward-backend.ts";
import { meterHappyPath, type PhaseContext, startMeteredRuntime } from "./happy-path.ts";
import { meterAllIn, meterKeptBodies } from "./lifetime.ts";
import { formatRowsPerEvent, meterAllRoutesMatched } from "./rows-per-event.ts";
import { deploymentWithSource, type ReceiverDeployment } from "./setup.ts";
import { ReceiptStore } from "./store.ts";

/** A source forwarding every event to the bench's local backend. */
const FORWARD_SOURCE = "bench-forward";

/**
 * Billed units per event on the happy path (every event accepted and processed on its first attempt), read from
 * the receiver's own meters before and after: first through the demo source's in-Worker handler, then, reported
 * apart, through a source that forwards every event to a local backend answering 200. Runs first, on fresh runtimes.
 */
export async function metersPhase(
  flags: BenchFlags,
  deployment: ReceiverDeployment,
  stateDir: string,
  context: PhaseContext,
) {
  const events = flags.phases.size === 1 ? flags.events : 2000;
  const concurrency = flags.metersConcurrency;
  console.log(
    `\n== 0. meters: ${events} happy-path events at concurrency ${concurrency}, billed units read from the runtime's own meters`,
  );
  // A runtime of its own: the all-in count fires the cron weeks ahead, which must not move the shared receiver's clock.
  const meterRuntime = await startMeteredRuntime(context, deployment, stateDir, "meters", 6);
  console.log("handler destination (demo source, handler:accounts):");
  const handler = await meterHappyPath(context, meterRuntime, deployment, {
    path: "/webhooks/demo",
    keyPrefix: "meter_evt_",
    events,
    concurrency,
  });
  const allIn = await meterAllIn(context, flags, meterRuntime, deployment, handler, concurrency);
  await meterRuntime.stop();

  const backend = await startForwardBackend();
  const forwarding = await startMeteredRuntime(
    context,
    deploymentWithSource(deployment, "meters-forward", FORWARD_SOURCE, {
      provider: "standard-webhooks",
      secrets: ["DEMO_WEBHOOK_SECRET"],
      destination: `http://127.0.0.1:${backend.port}/hooks`,
    }),
    stateDir,
    "meters-forward",
    5,
  );
  const forwardEvents = Math.max(1, Math.floor(events / 2));
  console.log(
    `forward destination (a source forwarding to a local backend that answers 200; ${forwardEvents} events):`,
  );
  const forward = await meterHappyPath(context, forwarding, deployment, {
    path: `/webhooks/${FORWARD_SOURCE}`,
    keyPrefix: "meter_fwd_",
    events: forwardEvents,
    concurrency,
  });
  await forwarding.stop();
  const forwardReceived = backend.received();
  console.log(`the backend received ${forwardReceived} forwards for ${forwardEvents} events`);
  if (forwardReceived < forwardEvents)
    context.failures.push(`meters: the forward backend received ${forwardReceived} of ${forwardEvents} events`);

  const fanOut = await meterFanOut(context, deployment, stateDir, backend, forwardEvents, concurrency);
  const allRoutes = await meterAllRoutesMatched(context, deployment, stateDir, backend, forwardEvents, concurrency);
  await backend.close();
  const rowsPerEvent = [
    { source: "one route (demo)", events, happy: handler.per, retention: allIn.retention },
    allRoutes,
  ];
  console.log(formatRowsPerEvent(rowsPerEvent));
  const keptBodies = await meterKeptBodies(context, flags, deployment, stateDir, events, concurrency, allIn.units);
  return { ...handler, allIn, forward, fanOut, rowsPerEvent, keptBodies };
}

/** Per event, a source with one route may write 3 D1 rows; each further matched route at most 2 more, and no D1 call. */
const D1_ROWS_PER_FURTHER_ROUTE = 2;

/**
 * The fan-out variant: a source with three routes (docs/routing.md, "Fan-out"), the ledger handler, a forward to
 * the local backend and a forward whose filter turns every event away, on a runtime of its own. Two matched routes:
 * a budget of 3 + 2 D1 rows per event, the D1 calls of one route.
 */
async function meterFanOut(
  context: PhaseContext,
  deployment: ReceiverDeployment,
  stateDir: string,
  backend: Awaited<ReturnType<typeof startForwardBackend>>,
  events: number,
  concurrency: number,
) {
  const runtime = await startMeteredRuntime(
    context,
    deploymentWithSource(deployment, "meters-fanout", FAN_OUT_SOURCE, fanOutSource(backend.port, "account.closed")),
    stateDir,
    "meters-fanout",
    7,
  );
  const d1RowsBudget = 3 + D1_ROWS_PER_FURTHER_ROUTE;
  console.log(
    `fan-out (a source with three routes: ledger → handler:accounts, backend → the local backend, audit → the local backend ` +
      `filtered to account.closed, which no event is; ${events} events; budget ≤ ${d1RowsBudget} D1 rows):`,
  );
  const seenBefore = backend.received();
  const fanOut = await meterHappyPath(context, runtime, deployment, {
    path: `/webhooks/${FAN_OUT_SOURCE}`,
    keyPrefix: "meter_fan_",
    events,
    concurrency,
    d1RowsBudget: `≤ ${d1RowsBudget}`,
  });
  await runtime.stop();
  const byPath = new Map<string, number>();
  for (const forward of backend.seen().slice(seenBefore)) byPath.set(forward.path, (byPath.get(forward.path) ?? 0) + 1);
  const routeRows = new ReceiptStore(runtime.options.persistDir).read(
    (database) =>
      database
        .prepare(
          `SELECT d.route AS route, COUNT(*) AS count FROM deliveries d JOIN receipts r ON r.id = d.receipt_id
           WHERE r.event_key LIKE 'meter_fan_%' GROUP BY d.route`,
        )
        .all() as Array<{ route: string; count: number }>,
  );
  console.log(
    `the backend received ${byPath.get("/backend") ?? 0} forwards on the backend route and ${byPath.get("/audit") ?? 0} on the filtered-out ` +
      `audit route for ${events} events; deliveries rows: ${routeRows.map(({ route, count }) => `${route} ${count}`).join(", ") || "none"}`,
  );
  if ((byPath.get("/backend") ?? 0) < events)
    context.failures.push(
      `meters (fan-out): the backend route received ${byPath.get("/backend") ?? 0} of ${events} events`,
    );
  if ((byPath.get("/audit") ?? 0) > 0)
    context.failures.push(`meters (fan-out): the filtered-out audit route received ${byPath.get("/audit")} events`);
  const over = [
    fanOut.per.d1RowsWritten > d1RowsBudget &&
      `D1 rows written ${fanOut.per.d1RowsWritten.toFixed(3)} > ${d1RowsBudget}`,
    fanOut.per.d1Calls > 0.2 && `D1 calls ${fanOut.per.d1Calls.toFixed(3)} > 0.2`,
    fanOut.per.doRowsWritten > 3 && `DO rows written ${fanOut.per.doRowsWritten.toFixed(3)} > 3`,
    fanOut.per.doRequests > 1.1 && `DO requests ${fanOut.per.doRequests.toFixed(3)} > 1.1`,
    fanOut.per.queueOperations > 0.5 && `queue operations ${fanOut.per.queueOperations.toFixed(3)} > 0.5`,
  ].filter((reason): reason is string => typeof reason === "string");
  console.log(`fan-out budget: ${over.length === 0 ? "within" : `over (${over.join("; ")})`}`);
  return { ...fanOut, d1RowsBudget, overBudget: over, forwardsByPath: Object.fromEntries(byPath) };
}
