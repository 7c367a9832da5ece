import { setTimeout as sleep } from "node:timers/promises";
import type { Sender } from "./sender.ts";
import { deploymentWithSource, type ReceiverDeployment } from "./setup.ts";
import {
  creditedEvents,
  NO_TOTALS,
  SOAK_ACCOUNT_PREFIX,
  SOAK_SOURCE,
  type SoakSample,
  takeSample,
} from "./soak-sample.ts";
import type { ReceiptStore } from "./store.ts";

/**
 * The soak phase: a fixed arrival rate for a while, with retention scaled down so that housekeeping has to keep
 * pace within the run, and the cron fired on a schedule the way Cloudflare would. Samples: soak-sample.ts.
 */

export { formatSamples, SOAK_SOURCE } from "./soak-sample.ts";

export interface SoakSettings {
  rate: number;
  minutes: number;
  payloadRetention: string;
  dedupeRetention: string;
  cronSeconds: number;
}

/**
 * The deployment with a soak source of its own, in a copy of the snapshot's wrangler.toml: the demo's provider
 * and handler (every event credits 1 to an account, so the accounts table counts processed events after
 * retention has deleted their receipts) and the scaled-down retention.
 */
export function soakDeployment(deployment: ReceiverDeployment, settings: SoakSettings): ReceiverDeployment {
  return deploymentWithSource(deployment, "soak", SOAK_SOURCE, {
    provider: "standard-webhooks",
    secrets: ["DEMO_WEBHOOK_SECRET"],
    destination: "handler:accounts",
    type_path: "type",
    subject_path: "data.account",
    payload_retention: settings.payloadRetention,
    dedupe_retention: settings.dedupeRetention,
  });
}

/** Deliveries at a fixed rate, each resent until acknowledged (an at-least-once sender). Returns the events acknowledged. */
export async function sendAtRate(
  sender: Sender,
  settings: SoakSettings,
  options: { accounts: number; maxInFlight: number },
): Promise<{ acknowledged: number; sent: number; resends: number; lateStarts: number }> {
  const startedAt = performance.now();
  const durationMs = settings.minutes * 60_000;
  const total = Math.floor((durationMs / 1000) * settings.rate);
  let acknowledged = 0;
  let resends = 0;
  let lateStarts = 0;
  let inFlight = 0;
  const pending: Promise<void>[] = [];
  const deliverOne = async (n: number): Promise<void> => {
    const body = JSON.stringify({
      type: "account.credited",
      data: { account: `${SOAK_ACCOUNT_PREFIX}${n % options.accounts}`, amount: 1, note: "x".repeat(600) },
    });
    for (let attempt = 0; ; attempt++) {
      const outcome = await sender.deliver(`soak_evt_${n}`, body);
      if (outcome.status !== "error" && outcome.status >= 200 && outcome.status < 300) break;
      resends++;
      await sleep(Math.min(10_000, 500 * 2 ** attempt));
    }
    acknowledged++;
  };
  for (let n = 0; n < total; n++) {
    const dueAt = startedAt + (n * 1000) / settings.rate;
    const wait = dueAt - performance.now();
    if (wait > 0) await sleep(wait);
    else if (wait < -1000) lateStarts++;
    while (inFlight >= options.maxInFlight) await sleep(5);
    inFlight++;
    pending.push(deliverOne(n).finally(() => inFlight--));
  }
  await Promise.all(pending);
  return { acknowledged, sent: total, resends, lateStarts };
}

/** Fires the cron every `cronSeconds` until stopped, each run with the current time as its scheduled time. */
export function cronSchedule(origin: () => string, cronSeconds: number): { stop: () => Promise<number> } {
  let stopped = false;
  let runs = 0;
  const loop = (async () => {
    while (!stopped) {
      const next = performance.now() + cronSeconds * 1000;
      try {
        const response = await fetch(`${origin()}/cdn-cgi/local/scheduled?cron=*/5+*+*+*+*&time=${Date.now()}`, {
          signal: AbortSignal.timeout(120_000),
        });
        await response.arrayBuffer();
        runs++;
      } catch {
        // A run that fails is the receiver's to record (reconcile_runs); the schedule goes on.
      }
      while (!stopped && performance.now() < next) await sleep(Math.min(1000, next - performance.now()));
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await loop;
      return runs;
    },
  };
}

/**
 * Steady state: once the dedupe window and one cron interval have passed, D1's size, the shards' size and the
 * receipts stored stay flat — within the saw-tooth a cron interval makes (what arrives between two runs, on top
 * of a dedupe window's worth) plus 15% — and the backlog stays below 15 seconds of arrivals (processing keeps pace).
 */
export function isSteady(samples: readonly SoakSample[], settings: SoakSettings): boolean {
  const dedupeSeconds = parseMinutes(settings.dedupeRetention) * 60;
  const window = samples.filter(
    (sample) =>
      sample.atSeconds >= dedupeSeconds + settings.cronSeconds && sample.atSeconds <= settings.minutes * 60 + 30,
  );
  if (window.length < 2) return false;
  const sawTooth = ((dedupeSeconds + settings.cronSeconds) / dedupeSeconds) * 1.15;
  const flat = (pick: (sample: SoakSample) => number) => {
    const values = window.map(pick);
    return Math.max(...values) <= sawTooth * Math.max(1, Math.min(...values));
  };
  const keepingPace = window.every((sample) => sample.backlog <= Math.max(50, settings.rate * 15));
  return (
    flat((sample) => sample.d1Bytes) &&
    flat((sample) => sample.shardBytes) &&
    flat((sample) => sample.receipts) &&
    keepingPace
  );
}

export interface SoakResult {
  samples: SoakSample[];
  steady: boolean;
  /** Acknowledged events whose effect was never applied (should be 0); `duplicated`: applied more than once. */
  lost: number;
  duplicated: number;
  acknowledged: number;
  credited: number;
  resends: number;
  lateStarts: number;
  cronRuns: number;
  settings: SoakSettings;
}

/**
 * The whole phase: send at the rate for the run's minutes while the cron runs on its schedule and a sample is taken
 * every 30 s; then stop sending, keep the cron going until the backlog is empty (up to five minutes) and take the
 * last sample. `onSample` prints each row as it comes.
 */
export async function runSoak(
  origin: () => string,
  persistDir: string,
  sender: Sender,
  store: ReceiptStore,
  settings: SoakSettings,
  onSample: (sample: SoakSample) => void,
): Promise<SoakResult> {
  const startedAt = performance.now();
  const cron = cronSchedule(origin, settings.cronSeconds);
  const samples: SoakSample[] = [];
  let totals = NO_TOTALS;
  const sampleNow = () => {
    const taken = takeSample(store, persistDir, Math.round((performance.now() - startedAt) / 1000), totals);
    totals = taken.totals;
    samples.push(taken.sample);
    onSample(taken.sample);
    return taken.sample;
  };
  let sending = true;
  const sampler = (async () => {
    for (let next = 30; sending; next += 30) {
      while (sending && performance.now() - startedAt < next * 1000) await sleep(250);
      if (sending) sampleNow();
    }
  })();
  const sent = await sendAtRate(sender, settings, { accounts: 200, maxInFlight: 256 });
  sending = false;
  await sampler;
  const drainDeadline = performance.now() + 5 * 60_000;
  let last = sampleNow();
  while (last.backlog > 0 && performance.now() < drainDeadline) {
    await sleep(5000);
    last = takeSample(store, persistDir, Math.round((performance.now() - startedAt) / 1000), totals).sample;
  }
  sampleNow();
  const cronRuns = await cron.stop();
  const credited = creditedEvents(store);
  return {
    samples,
    steady: isSteady(samples, settings),
    lost: Math.max(0, sent.acknowledged - credited),
    duplicated: Math.max(0, credited - sent.acknowledged),
    acknowledged: sent.acknowledged,
    credited,
    resends: sent.resends,
    lateStarts: sent.lateStarts,
    cronRuns,
    settings,
  };
}

/** "90s", "3m", "1h" as minutes (the soak's retention settings). */
export function parseMinutes(duration: string): number {
  const match = /^(\d+)(s|m|h)$/.exec(duration);
  if (!match) throw new Error(`not a duration: ${duration}`);
  const value = Number(match[1]);
  return match[2] === "s" ? value / 60 : match[2] === "m" ? value : value * 60;
}
