import { existsSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { afterFigures, meterAfterVariant } from "./after-variant.ts";
import type { BenchFlags } from "./flags.ts";
import { startForwardBackend } from "./forward-backend.ts";
import { meterHappyPath, type PhaseContext, startMeteredRuntime } from "./happy-path.ts";
import { meterAllIn, meterKeptBodies } from "./lifetime.ts";
import { formatStageTable, perEventFigures, writePerEventFile } from "./per-event-file.ts";
import {
  ALL_ROUTES_VARIANT,
  FAN_OUT_VARIANT,
  formatRowsPerEvent,
  meterRouteVariant,
  type RouteVariant,
} from "./route-variants.ts";
import { deploymentWithSource, type ReceiverDeployment } from "./setup.ts";
import { meterStages } from "./stages.ts";

/** Events per stage runtime: the stage rows are deterministic, so a few hundred say them. */
const STAGE_EVENTS = 500;

/** A source forwarding every event to the bench's local backend. */
const FORWARD_SOURCE = "bench-forward";

/**
 * Billed units per event on the happy path (every event accepted and processed on its first attempt), read from
 * the receiver's own meters before and after: first through the demo source's in-Worker handler, then, reported
 * apart, through a source that forwards every event to a local backend answering 200, and sources with three routes.
 * Then by stage (stages.ts), the bytes a receipt and a tombstone keep (vacuumed-bytes.ts), and the per-event figures
 * the capacity model reads (per-event-file.ts, written to --per-event-out). Runs first, on fresh runtimes.
 */
export async function metersPhase(
  flags: BenchFlags,
  deployment: ReceiverDeployment,
  stateDir: string,
  context: PhaseContext,
) {
  const events = flags.phases.size === 1 ? flags.events : 2000;
  const concurrency = flags.metersConcurrency;
  const command = `npm run bench -- ${process.argv.slice(2).join(" ")}`;
  if (flags.metersAfterOnly) {
    const backend = await startForwardBackend();
    try {
      const after = await meterAfterVariant(context, deployment, stateDir, backend, events, STAGE_EVENTS, concurrency);
      const figures = afterFigures(after, command);
      if (figures) writeBeforeAndAfter(resolve(flags.perEventOut), null, figures);
      return { after, perEventFigures: figures };
    } finally {
      await backend.close();
    }
  }
  console.log(
    `\n== 0. meters: ${events} happy-path events at concurrency ${concurrency}, billed units read from the runtime's own meters`,
  );
  const stages = await meterStages(context, deployment, stateDir, Math.min(events, STAGE_EVENTS), concurrency);
  // A runtime of its own: the all-in count fires the cron weeks ahead, which must not move the shared receiver's clock.
  const meterRuntime = await startMeteredRuntime(context, deployment, stateDir, "meters", 6);
  console.log("handler destination (demo source, handler:accounts):");
  const handler = await meterHappyPath(context, meterRuntime, deployment, {
    path: "/webhooks/demo",
    keyPrefix: "meter_evt_",
    events,
    concurrency,
  });
  const allIn = await meterAllIn(context, flags, meterRuntime, deployment, handler, concurrency, stateDir);
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

  const routeVariant = (variant: RouteVariant) =>
    meterRouteVariant(context, deployment, stateDir, backend, forwardEvents, concurrency, variant);
  const fanOut = await routeVariant(FAN_OUT_VARIANT);
  const allRoutes = await routeVariant(ALL_ROUTES_VARIANT);
  const after = await meterAfterVariant(context, deployment, stateDir, backend, events, STAGE_EVENTS, concurrency);
  await backend.close();
  const rowsPerEvent = [
    { source: "one route (demo)", events, happy: handler.per, retention: allIn.retention },
    {
      source: "three routes, all matched",
      events: forwardEvents,
      happy: allRoutes.per,
      retention: allRoutes.retention!,
    },
  ];
  console.log(formatRowsPerEvent(rowsPerEvent));
  const keptBodies = await meterKeptBodies(context, flags, deployment, stateDir, events, concurrency, allIn.units);
  const perEvent = stages
    ? perEventFigures(
        {
          stages,
          bodyDrop: allIn.bodyDrop,
          deletes: allIn.deletes,
          retentionEvents: allIn.retentionEvents,
          happy: handler.per,
          happyEvents: events,
          largeBody: allIn.large.perEvent,
          largeShare: flags.largeShare,
          cpuMs: handler.cpuMsPerEvent.workerd,
          allInUsdPerMillion: allIn.allInUsdPerMillion,
          bytes: allIn.bytes,
        },
        command,
      )
    : null;
  const afterPerEvent = afterFigures(after, command);
  if (perEvent) console.log(formatStageTable(perEvent));
  if (afterPerEvent) writeBeforeAndAfter(resolve(flags.perEventOut), perEvent, afterPerEvent);
  return {
    ...handler,
    allIn,
    forward,
    fanOut,
    allRoutes,
    rowsPerEvent,
    keptBodies,
    stages,
    perEventFigures: perEvent,
    after,
    afterPerEventFigures: afterPerEvent,
  };
}

/**
 * The figures file: the after's at the top level (what the capacity model reads: a source configured the issue 35
 * way), the before's under `before` — this run's, or when it measured the after alone, the file's own.
 */
function writeBeforeAndAfter(path: string, before: object | null, after: NonNullable<ReturnType<typeof afterFigures>>) {
  console.log(formatStageTable(after));
  const previous = existsSync(path) ? (JSON.parse(readFileSync(path, "utf8")) as { before?: object }) : null;
  const kept = before ?? previous?.before ?? (previous && !("configuredAs" in previous) ? previous : null);
  writePerEventFile(path, { ...after, ...(kept ? { before: kept } : {}) });
  console.log(`per-event figures (after, and before under "before") written to ${path}`);
}
