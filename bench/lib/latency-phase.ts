import { setTimeout as sleep } from "node:timers/promises";
import type { BenchFlags } from "./flags.ts";
import { type PhaseContext, startMeteredRuntime } from "./happy-path.ts";
import { readMeters } from "./meters.ts";
import type { Runtime } from "./runtime.ts";
import { Sender } from "./sender.ts";
import type { ReceiverDeployment } from "./setup.ts";
import { ReceiptStore } from "./store.ts";
import { waitUntilFinished } from "./wait.ts";

/** End-to-end latency at one arrival rate: from each event's first send to its receipt's processed_at. */
export interface LatencyAtRate {
  eventsPerSecond: number;
  events: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /**
   * The receiver's own meters over this rate's events, from before the first send until the last was processed:
   * whether the relay's batching holds at this rate (issue 37: a lone event goes at once, a busy shard still gathers).
   */
  perEvent: { queueOperations: number; d1RowsWritten: number; doRowsWritten: number };
}

const LATENCY_PORT_OFFSET = 5;
/** Events sent and processed before the measured runs, so neither pays for the isolate's first requests. */
const WARM_UP_EVENTS = 5;

/** The value at quantile `q` of sorted values, nearest rank. */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

/**
 * Open loop at a fixed rate for --latency-seconds: event n is sent at n / rate s whatever happened to the ones before
 * (a 2xx is waited for and a failed send retried, the event's clock running from its first send), then every
 * event's latency is its receipt's processed_at (the consumer's commit, the same machine's clock) less that send.
 */
async function latencyAtRate(
  runtime: Runtime,
  deployment: ReceiverDeployment,
  rate: number,
  seconds: number,
  keyPrefix: string,
): Promise<LatencyAtRate> {
  const events = Math.max(1, Math.round(rate * seconds));
  const sender = new Sender({
    origin: runtime.origin,
    path: "/webhooks/demo",
    secret: deployment.demoSecret,
    maxSockets: Math.max(4, Math.ceil(rate)),
  });
  const sentAt = new Map<string, number>();
  const metersBefore = await readMeters(runtime.origin, deployment.adminToken);
  const startedAt = performance.now();
  const sends: Promise<void>[] = [];
  for (let n = 0; n < events; n++) {
    const dueIn = startedAt + (n * 1000) / rate - performance.now();
    if (dueIn > 0) await sleep(dueIn);
    const eventKey = `${keyPrefix}${n}`;
    const body = JSON.stringify({
      type: "account.credited",
      data: { account: `lat_acct_${String(n % 200).padStart(3, "0")}`, amount: 1 },
    });
    sentAt.set(eventKey, Date.now());
    sends.push(
      (async () => {
        for (;;) {
          const outcome = await sender.deliver(eventKey, body);
          if (outcome.status !== "error" && outcome.status >= 200 && outcome.status < 300) return;
        }
      })(),
    );
  }
  await Promise.all(sends);
  sender.close();
  const store = new ReceiptStore(runtime.options.persistDir);
  await waitUntilFinished(store, keyPrefix, events, { origin: () => runtime.origin, stallMs: 30_000 });
  const metersAfter = await readMeters(runtime.origin, deployment.adminToken);
  const metered = (key: "queueOperations" | "doRowsWritten") => (metersAfter[key] - metersBefore[key]) / events;
  const perEvent = {
    queueOperations: metered("queueOperations"),
    // The receiver's own rows: the demo handler's effect rows are the user's (meters.ts, perEvent).
    d1RowsWritten:
      (metersAfter.d1RowsWritten -
        metersBefore.d1RowsWritten -
        (metersAfter.d1HandlerRowsWritten - metersBefore.d1HandlerRowsWritten)) /
      events,
    doRowsWritten: metered("doRowsWritten"),
  };
  const processed = store.read(
    (database) =>
      database
        .prepare("SELECT event_key AS eventKey, processed_at AS processedAt FROM receipts WHERE event_key LIKE ?")
        .all(`${keyPrefix}%`) as Array<{ eventKey: string; processedAt: number | null }>,
  );
  const latencies = processed
    .flatMap(({ eventKey, processedAt }) => {
      const sent = sentAt.get(eventKey);
      return sent === undefined || processedAt === null ? [] : [processedAt - sent];
    })
    .sort((a, b) => a - b);
  return {
    eventsPerSecond: rate,
    events: latencies.length,
    p50Ms: quantile(latencies, 0.5),
    p99Ms: quantile(latencies, 0.99),
    maxMs: latencies.at(-1) ?? Number.NaN,
    perEvent,
  };
}

/**
 * `--only latency`: the time from `send` to processed, p50 and p99, for a source at each of --latency-rates events
 * per second (1 and 100 by default), on a receiver runtime of its own with the production relay delay.
 */
export async function latencyPhase(
  flags: BenchFlags,
  deployment: ReceiverDeployment,
  stateDir: string,
  context: PhaseContext,
): Promise<{ rates: LatencyAtRate[] }> {
  const runtime = await startMeteredRuntime(context, deployment, stateDir, "latency", LATENCY_PORT_OFFSET);
  console.log(
    `\n== latency: send to processed, open loop for ${flags.latencySeconds} s at each of ${flags.latencyRates.join(", ")} events/s`,
  );
  await latencyAtRate(runtime, deployment, WARM_UP_EVENTS, 1, "lat_warm_");
  const rates: LatencyAtRate[] = [];
  console.log(
    `${"events/s".padStart(9)}${"events".padStart(8)}${"p50 ms".padStart(9)}${"p99 ms".padStart(9)}${"max ms".padStart(9)}` +
      `${"queue ops".padStart(11)}${"D1 rows".padStart(9)}${"DO rows".padStart(9)}   (per event)`,
  );
  for (const rate of flags.latencyRates) {
    const result = await latencyAtRate(runtime, deployment, rate, flags.latencySeconds, `lat_r${rate}_`);
    rates.push(result);
    console.log(
      `${String(rate).padStart(9)}${String(result.events).padStart(8)}${result.p50Ms.toFixed(0).padStart(9)}${result.p99Ms.toFixed(0).padStart(9)}${result.maxMs.toFixed(0).padStart(9)}` +
        `${result.perEvent.queueOperations.toFixed(3).padStart(11)}${result.perEvent.d1RowsWritten.toFixed(3).padStart(9)}${result.perEvent.doRowsWritten.toFixed(3).padStart(9)}`,
    );
  }
  await runtime.stop();
  return { rates };
}
