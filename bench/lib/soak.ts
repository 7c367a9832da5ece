import { setTimeout as sleep } from "node:timers/promises";
import {
  type BacklogPoint,
  type FaultReport,
  type FaultSpec,
  type FaultTargets,
  judgeFault,
  playFaults,
  TRACKER_RESOLUTION_S,
} from "./faults.ts";
import type { HeardOf } from "./forward-backend.ts";
import type { Sender } from "./sender.ts";
import { deploymentWithSource, type ReceiverDeployment, withReceiptRing } from "./setup.ts";
import { describeLostForwards, type LostForward } from "./soak-lost.ts";
import {
  backlogNow,
  backlogTotal,
  creditedEvents,
  NO_TOTALS,
  SOAK_ACCOUNT_PREFIX,
  SOAK_FORWARD_SOURCE,
  SOAK_SOURCE,
  type SoakSample,
  takeSample,
  unfinishedBySource,
} from "./soak-sample.ts";
import type { ReceiptStore } from "./store.ts";

/**
 * The soak phase: a fixed arrival rate for a while, with retention scaled down so that housekeeping has to keep
 * pace within the run, and the cron fired on a schedule the way Cloudflare would. Samples: soak-sample.ts.
 */

export { formatSamples, SOAK_FORWARD_SOURCE, SOAK_SOURCE } from "./soak-sample.ts";

export interface SoakSettings {
  rate: number;
  minutes: number;
  payloadRetention: string;
  dedupeRetention: string;
  cronSeconds: number;
  /** Faults played while the rate keeps arriving (--faults; bench/lib/faults.ts); none for the plain soak. */
  faults: FaultSpec[];
}

/** With faults, one arrival in FORWARD_EVERY goes to the forward source, and one in LARGE_EVERY carries a large body. */
const FORWARD_EVERY = 5;
const LARGE_EVERY = 100;
/** Above the soak source's R2 threshold (the default, 64 KB). */
const LARGE_BODY_BYTES = 70 * 1024;
/**
 * The forward source's retry schedule: from 1 s, at most 5 s apart. The default (30 s, doubling) would make the
 * drain after a destination outage wait for the schedule, not measure how fast the receiver catches up. 200
 * retries (over 15 minutes at 5 s) outlast any outage a soak plays: with the default 12, a 2-minute outage sends
 * deliveries dead after about a minute, and the scaled-down retention then deletes them.
 */
/** The forward source's ring of receipt databases (src/sources/partitions.ts). */
const SOAK_RING = ["DB_P0", "DB_P1", "DB_P2", "DB_P3"];
const FORWARD_RETRY = { base_delay_seconds: 1, max_delay_seconds: 5, max_retries: 200 };

/**
 * The deployment with a soak source of its own, in a copy of the snapshot's wrangler.toml: the demo's provider
 * and handler (every event credits 1 to an account, so the accounts table counts processed events after
 * retention has deleted their receipts) and the scaled-down retention. With a forward backend's port, a second
 * source forwarding there (the faulted soak's destination).
 */
export function soakDeployment(
  deployment: ReceiverDeployment,
  settings: SoakSettings,
  forwardPort: number | null = null,
): ReceiverDeployment {
  const soak = deploymentWithSource(deployment, "soak", SOAK_SOURCE, {
    provider: "standard-webhooks",
    secrets: ["DEMO_WEBHOOK_SECRET"],
    destination: "handler:accounts",
    type_path: "type",
    subject_path: "data.account",
    payload_retention: settings.payloadRetention,
    dedupe_retention: settings.dedupeRetention,
  });
  if (forwardPort === null) return soak;
  // The forward source stores the issue-35 way, so the faults' recovery is measured on that path too: bodies in R2
  // segments, receipts in a ring of four databases, one key window a period (the ring keeps two: (4 − 2) periods),
  // archived and dropped by the soak's own cron while the rate keeps arriving.
  const forward = deploymentWithSource(soak, "soak", SOAK_FORWARD_SOURCE, {
    provider: "standard-webhooks",
    secrets: ["DEMO_WEBHOOK_SECRET"],
    destination: `http://127.0.0.1:${forwardPort}/hooks`,
    type_path: "type",
    payload_retention: settings.payloadRetention,
    dedupe_retention: settings.dedupeRetention,
    retry: FORWARD_RETRY,
    body_segments: true,
    database: "partitions",
  });
  return withReceiptRing(forward, { bindings: SOAK_RING, period: settings.dedupeRetention });
}

/** The key the forward backend counts a forwarded soak event under (the event key it was sent with). */
export function forwardedKey(body: string): string | null {
  try {
    return (JSON.parse(body) as { data?: { key?: string } }).data?.key ?? null;
  } catch {
    return null;
  }
}

/** Who receives arrival `n`: with faults, every FORWARD_EVERY-th goes to the forward source. */
const isForwarded = (n: number, faulted: boolean) => faulted && n % FORWARD_EVERY === FORWARD_EVERY - 1;

export interface SoakSenders {
  soak: Sender;
  /** The forward source's sender, with faults only. */
  forward: Sender | null;
}

/**
 * Deliveries at a fixed rate, each resent until acknowledged (an at-least-once sender). Returns the events
 * acknowledged; each delivery not answered 2xx is told to `onFailure` (seconds since `startedAt`).
 */
export async function sendAtRate(
  senders: SoakSenders,
  settings: SoakSettings,
  options: {
    accounts: number;
    maxInFlight: number;
    startedAt: number;
    onFailure: (atS: number) => void;
    /** Ends the sending early (the fault schedule failed): nothing more is started, and resends stop. */
    signal?: AbortSignal;
  },
): Promise<{
  acknowledged: number;
  forwardedAcknowledged: string[];
  sent: number;
  resends: number;
  lateStarts: number;
}> {
  const { startedAt } = options;
  const faulted = senders.forward !== null;
  const withLargeBodies = settings.faults.some((fault) => fault.kind === "r2");
  const forwardedAcknowledged: string[] = [];
  const durationMs = settings.minutes * 60_000;
  const total = Math.floor((durationMs / 1000) * settings.rate);
  let acknowledged = 0;
  let resends = 0;
  let lateStarts = 0;
  let inFlight = 0;
  const pending: Promise<void>[] = [];
  const deliverOne = async (n: number): Promise<void> => {
    const forwarded = isForwarded(n, faulted);
    const key = forwarded ? `soak_fwd_${n}` : `soak_evt_${n}`;
    const large = withLargeBodies && n % LARGE_EVERY === LARGE_EVERY / 2;
    const body = JSON.stringify({
      type: "account.credited",
      data: {
        // A forwarded event credits nothing (the backend counts it); its key lets the backend tell events apart.
        ...(forwarded ? { key } : { account: `${SOAK_ACCOUNT_PREFIX}${n % options.accounts}` }),
        amount: 1,
        note: "x".repeat(large ? LARGE_BODY_BYTES : 600),
      },
    });
    const sender = forwarded ? senders.forward! : senders.soak;
    for (let attempt = 0; ; attempt++) {
      if (options.signal?.aborted) return;
      const outcome = await sender.deliver(key, body);
      if (outcome.status !== "error" && outcome.status >= 200 && outcome.status < 300) break;
      options.onFailure((performance.now() - startedAt) / 1000);
      resends++;
      await sleep(Math.min(10_000, 500 * 2 ** attempt));
    }
    if (forwarded) forwardedAcknowledged.push(key);
    else acknowledged++;
  };
  for (let n = 0; n < total && !options.signal?.aborted; n++) {
    const dueAt = startedAt + (n * 1000) / settings.rate;
    const wait = dueAt - performance.now();
    if (wait > 0) await sleep(wait);
    else if (wait < -1000) lateStarts++;
    while (inFlight >= options.maxInFlight) await sleep(5);
    inFlight++;
    pending.push(deliverOne(n).finally(() => inFlight--));
  }
  await Promise.all(pending);
  return { acknowledged, forwardedAcknowledged, sent: total, resends, lateStarts };
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
 * Steady state: once the dedupe window and one cron interval have passed, D1's size, the shards' size, the ring's
 * size and the receipts stored stay flat — within the saw-tooth a cron interval makes (what arrives between two
 * runs, on top of a dedupe window's worth; the ring's own, below) plus 15% — and the backlog stays below 15 seconds
 * of arrivals (processing keeps pace).
 */
export function isSteady(samples: readonly SoakSample[], settings: SoakSettings): boolean {
  const dedupeSeconds = parseMinutes(settings.dedupeRetention) * 60;
  const window = samples.filter(
    (sample) =>
      sample.atSeconds >= dedupeSeconds + settings.cronSeconds && sample.atSeconds <= settings.minutes * 60 + 30,
  );
  if (window.length < 2) return false;
  const sawTooth = ((dedupeSeconds + settings.cronSeconds) / dedupeSeconds) * 1.15;
  // The ring (SOAK_RING, one period a dedupe window: soakDeployment) empties a partition when it turns to write there
  // again (src/reconcile/partition-drop.ts), so it fills for (periods − 1) periods and then holds between
  // (periods − 2) and (periods − 1) periods' arrivals, plus a cron interval: judged from then on, when the run is
  // that long (the 8-minute faulted soak is not, and the ring is left unjudged there).
  const ringFrom = (SOAK_RING.length - 1) * dedupeSeconds + settings.cronSeconds;
  const ringWindow = window.filter((sample) => sample.atSeconds >= ringFrom);
  const ringSawTooth =
    (((SOAK_RING.length - 1) * dedupeSeconds + settings.cronSeconds) / ((SOAK_RING.length - 2) * dedupeSeconds)) * 1.15;
  const ringFlat = (pick: (sample: SoakSample) => number) => {
    if (ringWindow.length < 2) return true;
    const values = ringWindow.map(pick);
    return Math.max(...values) <= ringSawTooth * Math.max(1, Math.min(...values));
  };
  const flat = (pick: (sample: SoakSample) => number) => {
    const values = window.map(pick);
    return Math.max(...values) <= sawTooth * Math.max(1, Math.min(...values));
  };
  const keepingPace = window.every((sample) => sample.backlog <= Math.max(50, settings.rate * 15));
  return (
    flat((sample) => sample.d1Bytes) &&
    flat((sample) => sample.shardBytes) &&
    flat((sample) => sample.receipts) &&
    ringFlat((sample) => sample.ringBytes) &&
    ringFlat((sample) => sample.ringReceipts) &&
    keepingPace
  );
}

export interface SoakResult {
  samples: SoakSample[];
  /**
   * With faults: judged on the samples outside each fault, its drain and two cron intervals after; null when too few
   * are left to judge.
   */
  steady: boolean | null;
  /**
   * Acknowledged events whose effect was never applied and which are not `unfinished` or `dead` either: credits
   * and forwards (should be 0); `duplicated`: credits applied more than once.
   */
  lost: number;
  duplicated: number;
  /** Handler events acknowledged, and credits applied. */
  acknowledged: number;
  credited: number;
  forwarded: { acknowledged: number; delivered: number; lost: number; repeated: number };
  /** Every forward acknowledged and never answered 200, described (soak-lost.ts; the first LOST_DESCRIBED). */
  undeliveredForwards: LostForward[];
  /**
   * Events neither applied nor lost when the run ended: still in the backlog after the drain (up to five minutes),
   * or dead. Either fails the run, apart from `lost`: nothing can be said of them yet, or a human must replay them.
   */
  unfinished: number;
  dead: number;
  faults: FaultReport[];
  /** Deliveries not answered 2xx outside every fault's window (null without faults). */
  ackFailuresOutsideFaults: number | null;
  backlogTimeline: BacklogPoint[];
  resends: number;
  lateStarts: number;
  cronRuns: number;
  settings: SoakSettings;
}

/** With faults: what to act on, and the forward backend's count of forwards answered 200 per event key. */
export interface SoakFaulting {
  targets: FaultTargets;
  forwardedPerKey: () => ReadonlyMap<string, number>;
  heardOf: (eventKey: string) => HeardOf | null;
  log: (line: string) => void;
}

/**
 * The whole phase: send at the rate for the run's minutes while the cron runs on its schedule, a sample is taken
 * every 30 s and, with faults, they play at their times while the backlog is read every second; then stop sending,
 * keep the cron going until the backlog is empty (up to five minutes) and take the last sample. `onSample` prints
 * each row as it comes.
 */
export async function runSoak(
  origin: () => string,
  persistDir: string,
  senders: SoakSenders,
  store: ReceiptStore,
  settings: SoakSettings,
  onSample: (sample: SoakSample) => void,
  faulting: SoakFaulting | null = null,
): Promise<SoakResult> {
  const startedAt = performance.now();
  const secondsNow = () => (performance.now() - startedAt) / 1000;
  const cron = cronSchedule(origin, settings.cronSeconds);
  const samples: SoakSample[] = [];
  let totals = NO_TOTALS;
  const sampleNow = () => {
    const taken = takeSample(store, persistDir, Math.round(secondsNow()), totals);
    totals = taken.totals;
    samples.push(taken.sample);
    onSample(taken.sample);
    return taken.sample;
  };
  let sending = true;
  let finished = false;
  const sampler = (async () => {
    for (let next = 30; sending; next += 30) {
      while (sending && performance.now() - startedAt < next * 1000) await sleep(250);
      if (sending) sampleNow();
    }
  })();
  const timeline: BacklogPoint[] = [];
  const tracker = (async () => {
    if (!faulting) return;
    while (!finished) {
      const parts = backlogNow(store, persistDir);
      if (parts !== null) timeline.push({ atS: secondsNow(), backlog: backlogTotal(parts), parts });
      await sleep(TRACKER_RESOLUTION_S * 1000);
    }
  })();
  const ackFailureTimes: number[] = [];
  // A fault that cannot be played (a runtime that never comes back) ends the sending at once, and the run ends with
  // its error after the sampler, the tracker and the cron have stopped, so the bench's shutdown stops the runtime.
  // Left unhandled until the sending ends, it would end the process there and leave wrangler dev running.
  const stopSending = new AbortController();
  const played = faulting
    ? playFaults(settings.faults, faulting.targets, startedAt, faulting.log).catch((error: unknown) => {
        stopSending.abort();
        throw error;
      })
    : Promise.resolve([]);
  played.catch(() => undefined);
  const sent = await sendAtRate(senders, settings, {
    accounts: 200,
    maxInFlight: 256,
    startedAt,
    onFailure: (atS) => ackFailureTimes.push(atS),
    signal: stopSending.signal,
  });
  sending = false;
  await sampler;
  let faultTimes: Awaited<typeof played>;
  try {
    faultTimes = await played;
  } catch (error) {
    finished = true;
    await tracker;
    await cron.stop();
    throw error;
  }
  const drainDeadline = performance.now() + 5 * 60_000;
  let last = sampleNow();
  while (last.backlog > 0 && performance.now() < drainDeadline) {
    await sleep(5000);
    last = takeSample(store, persistDir, Math.round(secondsNow()), totals).sample;
  }
  // A few seconds more of the backlog timeline, so a drain that ends with the run is seen ending.
  if (faulting) await sleep(3000);
  finished = true;
  await tracker;
  sampleNow();
  const cronRuns = await cron.stop();
  const credited = creditedEvents(store);
  const left = unfinishedBySource(store, persistDir);
  const handlerLeft = left.get(SOAK_SOURCE)!;
  const forwardLeft = left.get(SOAK_FORWARD_SOURCE)!;

  const faults: FaultReport[] = [];
  for (const [index, fault] of faultTimes.entries()) {
    const previous = faults[index - 1];
    const previousSettledAt = previous ? previous.startedAt + previous.durationS + (previous.drainedAfterS ?? 0) : null;
    faults.push(
      judgeFault(
        { ...fault, nextStartsAt: faultTimes[index + 1]?.startedAt ?? null, previousSettledAt },
        timeline,
        ackFailureTimes,
        settings.rate,
      ),
    );
  }
  const forwarded = forwardOutcome(
    sent.forwardedAcknowledged,
    faulting?.forwardedPerKey() ?? new Map(),
    forwardLeft.unfinished + forwardLeft.dead,
  );
  const undeliveredForwards = faulting
    ? describeLostForwards(store, persistDir, SOAK_FORWARD_SOURCE, forwarded.undelivered, faulting.heardOf)
    : [];
  const windows = faults.map((fault) => ({
    from: fault.startedAt,
    to: fault.startedAt + fault.durationS + (fault.drainedAfterS ?? Infinity) + 2 * settings.cronSeconds,
  }));
  // The same window judgeFault counts a fault's ack failures in: from its start to 5 s after its end.
  const outsideFaults = ackFailureTimes.filter(
    (at) => !faultTimes.some((fault) => at >= fault.startedAt && at <= fault.endedAt + 5),
  ).length;
  const handlerLost = Math.max(0, sent.acknowledged - credited - handlerLeft.unfinished - handlerLeft.dead);
  const handlerDuplicated = Math.max(0, credited - sent.acknowledged);
  return {
    samples,
    steady: steadyOutsideFaults(samples, windows, settings),
    lost: handlerLost + forwarded.lost,
    duplicated: handlerDuplicated,
    acknowledged: sent.acknowledged,
    credited,
    forwarded: {
      acknowledged: forwarded.acknowledged,
      delivered: forwarded.delivered,
      lost: forwarded.lost,
      repeated: forwarded.repeated,
    },
    undeliveredForwards,
    unfinished: handlerLeft.unfinished + forwardLeft.unfinished,
    dead: handlerLeft.dead + forwardLeft.dead,
    resends: sent.resends,
    lateStarts: sent.lateStarts,
    cronRuns,
    faults,
    ackFailuresOutsideFaults: faulting ? outsideFaults : null,
    backlogTimeline: timeline.map((point) => ({ ...point, atS: Math.round(point.atS * 10) / 10 })),
    settings,
  };
}

/**
 * The plain soak's verdict on the samples outside every fault's window; null when too few are left to judge (two or
 * more after one dedupe window and one cron interval), which a short run with faults every few minutes can be.
 */
function steadyOutsideFaults(
  samples: readonly SoakSample[],
  windows: ReadonlyArray<{ from: number; to: number }>,
  settings: SoakSettings,
): boolean | null {
  const outside = samples.filter(
    (sample) => !windows.some((w) => sample.atSeconds >= w.from && sample.atSeconds <= w.to),
  );
  const judged = outside.filter(
    (sample) => sample.atSeconds >= parseMinutes(settings.dedupeRetention) * 60 + settings.cronSeconds,
  );
  if (windows.length > 0 && judged.length < 2) return null;
  return isSteady(outside, settings);
}

/**
 * Forwarded events as the backend saw them: acknowledged but never answered 200 there is lost; answered 200 more
 * than once is a repeat. Forwards are at least once by design (each carries `Idempotency-Key`, the same on every
 * try), so a repeat is reported, not counted as applied twice.
 */
function forwardOutcome(acknowledged: readonly string[], perKey: ReadonlyMap<string, number>, notFinished: number) {
  const undelivered = acknowledged.filter((key) => (perKey.get(key) ?? 0) === 0);
  const delivered = acknowledged.length - undelivered.length;
  return {
    acknowledged: acknowledged.length,
    delivered,
    undelivered,
    lost: Math.max(0, acknowledged.length - delivered - notFinished),
    repeated: [...perKey.values()].filter((times) => times > 1).length,
  };
}

/** "90s", "3m", "1h" as minutes (the soak's retention settings). */
export function parseMinutes(duration: string): number {
  const match = /^(\d+)(s|m|h)$/.exec(duration);
  if (!match) throw new Error(`not a duration: ${duration}`);
  const value = Number(match[1]);
  return match[2] === "s" ? value / 60 : match[2] === "m" ? value : value * 60;
}
