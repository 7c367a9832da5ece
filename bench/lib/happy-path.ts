import { setTimeout as sleep } from "node:timers/promises";
import { eventsWithinInclusions, formatPerEvent, perEvent, readMeters, usdPerMillion } from "./meters.ts";
import { cpuMsPer } from "./perf.ts";
import type { Runtime } from "./runtime.ts";
import { Sender } from "./sender.ts";
import { type ReceiverDeployment, receiverRuntime } from "./setup.ts";
import { ReceiptStore, storedBytes } from "./store.ts";
import { waitUntilFinished } from "./wait.ts";

/** What a bench phase shares with the run: where its failures go, the runtimes stopped at shutdown, its ports. */
export interface PhaseContext {
  failures: string[];
  runtimes: Runtime[];
  /** The port at `offset` from --port-base, or a free one when no base is fixed. */
  portAt(offset: number): Promise<number>;
}

/**
 * Starts a receiver runtime of its own for one measurement (its own persisted state, so its meters and its clock
 * are its own), on the ports at `portOffset` and `portOffset + 10`; it is stopped at shutdown if not before.
 */
export async function startMeteredRuntime(
  context: PhaseContext,
  deployment: ReceiverDeployment,
  stateDir: string,
  label: string,
  portOffset: number,
): Promise<Runtime> {
  const runtime = receiverRuntime(
    deployment,
    stateDir,
    label,
    await context.portAt(portOffset),
    await context.portAt(portOffset + 10),
  );
  context.runtimes.push(runtime);
  await runtime.start();
  return runtime;
}

/** One happy-path measurement: `events` events to `path`, keyed `keyPrefix` + n, `concurrency` at a time. */
export interface HappyPathRun {
  path: string;
  keyPrefix: string;
  events: number;
  concurrency: number;
  /** Pads each body to about this many bytes (a large body's R2 path); none by default. */
  padToBytes?: number;
  /** The D1 rows budget printed beside the meter ("≤ 3" by default). */
  d1RowsBudget?: string;
  /** Also wait for the further routes' deliveries (a source with several routes). */
  deliveries?: boolean;
}

/**
 * Sends `events` signed happy-path events to `path` (each resent until a 2xx), waits until every one is finished,
 * and reads the billed units they spent from the runtime's own meters before and after, with the runtime's CPU.
 */
export async function meterHappyPath(
  context: PhaseContext,
  runtime: Runtime,
  deployment: ReceiverDeployment,
  run: HappyPathRun,
) {
  const { path, keyPrefix, events, concurrency, d1RowsBudget = "≤ 3" } = run;
  const store = new ReceiptStore(runtime.options.persistDir);
  const storedBefore = storedBytes(store, runtime.options.persistDir);
  const before = await readMeters(runtime.origin, deployment.adminToken);
  const cpuBefore = runtime.cpuSeconds();
  const startedAt = performance.now();
  const deliveries = await sendHappyEvents(runtime, deployment, run);
  const waited = await waitUntilFinished(store, keyPrefix, events, {
    origin: () => runtime.origin,
    startedAt,
    deliveries: run.deliveries,
  });
  // The queue deletes a message when its consumer returns: give the last acknowledgements a moment to land.
  await sleep(3000);
  const cpuMsPerEvent = cpuMsPer(cpuBefore, runtime.cpuSeconds(), events);
  const after = await readMeters(runtime.origin, deployment.adminToken);
  const per = perEvent(before, after, events, deliveries);
  const usd = usdPerMillion(per);
  const inclusions = eventsWithinInclusions(per);
  console.log(formatPerEvent(per, d1RowsBudget));
  console.log(
    `runtime CPU per event, first send until processed: workerd ${cpuMsPerEvent.workerd.toFixed(2)} ms, wrangler's node ${cpuMsPerEvent.wrangler.toFixed(2)} ms`,
  );
  console.log(
    `USD per million events beyond the inclusions (handler's effect rows not counted): $${usd.toFixed(2)}; ` +
      `the Workers Paid inclusions cover ${inclusions.events.toLocaleString("en-US")} events a month (first to run out: ${inclusions.limitedBy}); ` +
      `${waited.finished} of ${events} finished, receipts by status: ${[...waited.counts].map(([status, count]) => `${status} ${count}`).join(", ")}`,
  );
  if (waited.finished < events)
    context.failures.push(`meters (${path}): only ${waited.finished} of ${events} events finished`);
  return {
    events,
    concurrency,
    perEvent: {
      d1RowsWritten: per.d1RowsWritten,
      d1RowsRead: per.d1RowsRead,
      d1Calls: per.d1Calls,
      doRowsWritten: per.doRowsWritten,
      doRowsRead: per.doRowsRead,
      doRequests: per.doRequests,
      queueOperations: per.queueOperations,
    },
    handlerRowsWrittenPerEvent: per.handlerRowsWritten,
    alarmWritesPerEvent: per.alarmWrites,
    workersRequestsPerEvent: per.workersRequests,
    d1DurationMsPerEvent: per.d1DurationMs,
    usdPerMillion: usd,
    per,
    cpuMsPerEvent,
    eventsWithinMonthlyInclusions: inclusions,
    raw: { before, after },
    /** What the runtime's D1 and shards store, before the first send and once every event was processed. */
    stored: { before: storedBefore, after: storedBytes(store, runtime.options.persistDir) },
  };
}

/**
 * Sends `run.events` signed happy-path events (`account.credited`, about 80 bytes unless padded), `concurrency` at a
 * time, each resent until a 2xx; returns the deliveries it took.
 */
export async function sendHappyEvents(
  runtime: Runtime,
  deployment: ReceiverDeployment,
  run: Pick<HappyPathRun, "path" | "keyPrefix" | "events" | "concurrency" | "padToBytes">,
): Promise<number> {
  const { path, keyPrefix, events, concurrency, padToBytes = 0 } = run;
  const sender = new Sender({ origin: runtime.origin, path, secret: deployment.demoSecret, maxSockets: concurrency });
  let next = 0;
  let deliveries = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let n = next++; n < events; n = next++) {
        const event = {
          type: "account.credited",
          data: { account: `meter_acct_${String(n % 500).padStart(4, "0")}`, amount: 100 },
        };
        const body = JSON.stringify(padToBytes > 0 ? { ...event, padding: "x".repeat(padToBytes) } : event);
        for (;;) {
          deliveries++;
          const outcome = await sender.deliver(`${keyPrefix}${n}`, body);
          if (outcome.status !== "error" && outcome.status >= 200 && outcome.status < 300) break;
        }
      }
    }),
  );
  sender.close();
  return deliveries;
}

export type HappyPathMeters = Awaited<ReturnType<typeof meterHappyPath>>;
