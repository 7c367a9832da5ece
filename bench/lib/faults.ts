import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { ReceiverDeployment } from "./setup.ts";
import type { BacklogParts } from "./soak-sample.ts";

/**
 * Faults injected into the soak while its steady rate keeps arriving (`--faults`), and the verdict on each.
 *
 *   d1@60s+60s           D1 unavailable from 60 s into the run, for 60 s
 *   r2@2m+30s            the bodies bucket unavailable (R2)
 *   destination@3m+2m    the forward destination answers 503 to everything
 *   kill@5m              the runtime (wrangler dev: workerd runs the Worker, its shards and the queue consumer in
 *                        one process group) SIGKILLed and started again at once; kill@5m+10s stays down 10 s
 *   restart@7m           the same with SIGTERM: the receiver restarted
 *
 * D1 and R2 outages are switched in the running Worker by the local-only switch (src/lib/local-faults.ts), asked
 * through wrangler dev's scheduled hook; the destination is the bench's own backend; kill and restart reuse the
 * bench's process-group handling (runtime.ts). Pure parts (parsing, the verdict) are separate from the I/O.
 */

export const FAULT_KINDS = ["d1", "r2", "destination", "kill", "restart"] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export interface FaultSpec {
  kind: FaultKind;
  /** Seconds from the start of arrivals. */
  atS: number;
  /** How long the fault lasts (outages), or how long the runtime stays down before it starts again (kill, restart). */
  forS: number;
}

/** Faults during which the design says acknowledgements go on answering 2xx (bodies under the R2 threshold). */
const ACKS_GO_ON: ReadonlySet<FaultKind> = new Set(["d1", "r2", "destination"]);
/** After recovery the excess backlog must drain at least this many times faster than traffic arrives. */
export const DRAIN_SPEEDUP = 5;
/** The soak reads the backlog once a second while faults play. */
export const TRACKER_RESOLUTION_S = 1;

export const FAULTS_HELP = `  --faults LIST         soak: faults injected while the rate keeps arriving, comma-separated KIND@START[+DURATION]
                        (durations like "90s" or "2m"): d1@60s+60s (D1 unavailable), r2@2m+30s (R2 unavailable),
                        destination@3m+2m (the forward destination answers 503), kill@5m[+10s] (SIGKILL of the runtime
                        that runs the queue consumer, restarted at once or after the given time), restart@7m[+5s]
                        (SIGTERM and start). Fault windows may not overlap. Local runs only.`;

function seconds(text: string, what: string): number {
  const match = /^(\d+)(s|m)$/.exec(text);
  if (!match) throw new Error(`${what}: "${text}" is not a duration like "90s" or "2m"`);
  return Number(match[1]) * (match[2] === "m" ? 60 : 1);
}

/** `d1@60s+60s,destination@2m+2m,kill@5m` into specs, sorted by start; throws with a clear message. Pure. */
export function parseFaults(list: string, minutes: number): FaultSpec[] {
  const specs = list
    .split(",")
    .filter((entry) => entry.trim() !== "")
    .map((entry) => {
      const match = /^([a-z0-9]+)@([^+]+)(?:\+(.+))?$/.exec(entry.trim());
      if (!match) throw new Error(`--faults: "${entry}" is not KIND@START[+DURATION]`);
      const kind = match[1] as FaultKind;
      if (!FAULT_KINDS.includes(kind))
        throw new Error(`--faults: unknown kind "${match[1]}" (${FAULT_KINDS.join(", ")})`);
      const atS = seconds(match[2]!, `--faults ${entry}`);
      const outage = kind === "d1" || kind === "r2" || kind === "destination";
      if (outage && match[3] === undefined)
        throw new Error(`--faults: ${entry} needs a duration (${kind}@START+DURATION)`);
      const forS = match[3] === undefined ? 0 : seconds(match[3], `--faults ${entry}`);
      if (outage && forS === 0) throw new Error(`--faults: ${entry} needs a duration above 0`);
      if (atS >= minutes * 60)
        throw new Error(`--faults: ${entry} starts after the last arrival (--minutes ${minutes})`);
      return { kind, atS, forS };
    })
    .sort((a, b) => a.atS - b.atS);
  for (let index = 1; index < specs.length; index++) {
    const before = specs[index - 1]!;
    if (specs[index]!.atS < before.atS + before.forS)
      throw new Error(`--faults: ${specs[index]!.kind}@${specs[index]!.atS}s starts inside ${before.kind}'s window`);
  }
  return specs;
}

export interface FaultReport {
  kind: FaultKind;
  /** Seconds from the start of arrivals when the fault began, and how long it lasted (for kill and restart: until acks answered again). */
  startedAt: number;
  durationS: number;
  /** Deliveries that did not get a 2xx, answered between the fault's start and 5 s after its end. */
  ackFailures: number;
  /** Highest backlog (claims not yet relayed + receipts pending or processing) from the start until drained. */
  backlogPeak: number;
  /**
   * The backlog before the fault: the highest in the 30 s before it (after the previous fault's drain), at least 5 s
   * of arrivals.
   */
  backlogBefore: number;
  /** Seconds after the fault ended until the backlog was back to `backlogBefore`; null: not within the run. */
  drainedAfterS: number | null;
  /**
   * (backlogPeak − backlogBefore) / drainedAfterS, over the arrival rate: how many times faster than traffic arrives
   * the excess drained. null when it drained within the backlog's reading resolution (a second), or never.
   */
  drainSpeedup: number | null;
  problems: string[];
}

export interface BacklogPoint {
  atS: number;
  backlog: number;
  /** What the backlog is made of (bench/lib/soak-sample.ts): where a drain's time goes. */
  parts?: BacklogParts;
}

/** One fault's figures and what is wrong with them, from the backlog timeline and the sender's failures. Pure. */
export function judgeFault(
  fault: {
    kind: FaultKind;
    startedAt: number;
    endedAt: number;
    nextStartsAt: number | null;
    /** When the fault before this one had drained (or ended, when it never did): its tail is not this one's "before". */
    previousSettledAt: number | null;
  },
  timeline: readonly BacklogPoint[],
  ackFailureTimes: readonly number[],
  rate: number,
): FaultReport {
  const beforeFrom = Math.max(fault.startedAt - 30, fault.previousSettledAt ?? Number.NEGATIVE_INFINITY);
  const before = timeline.filter((point) => point.atS >= beforeFrom && point.atS < fault.startedAt);
  const backlogBefore = Math.max(Math.ceil(rate * 5), ...before.map((point) => point.backlog));
  const afterEnd = timeline.filter(
    (point) => point.atS >= fault.endedAt && (fault.nextStartsAt === null || point.atS < fault.nextStartsAt),
  );
  const drained = afterEnd.find((point) => point.backlog <= backlogBefore);
  const drainedAfterS = drained ? drained.atS - fault.endedAt : null;
  const until = drained?.atS ?? afterEnd.at(-1)?.atS ?? fault.endedAt;
  const during = timeline.filter((point) => point.atS >= fault.startedAt && point.atS <= until);
  const backlogPeak = Math.max(0, ...during.map((point) => point.backlog));
  const excess = backlogPeak - backlogBefore;
  // The backlog is read once a second: a drain within that is as fast as this can tell, and passes.
  const withinResolution = drainedAfterS !== null && (excess <= 0 || drainedAfterS <= TRACKER_RESOLUTION_S);
  const drainSpeedup = drainedAfterS === null || withinResolution ? null : excess / drainedAfterS / rate;
  const ackFailures = ackFailureTimes.filter((at) => at >= fault.startedAt && at <= fault.endedAt + 5).length;

  const problems: string[] = [];
  const name = `${fault.kind}@${fault.startedAt.toFixed(0)}s`;
  if (ACKS_GO_ON.has(fault.kind) && ackFailures > 0)
    problems.push(
      `${name}: ${ackFailures} deliveries were not acknowledged, though acks must go on through this fault`,
    );
  if (drainedAfterS === null)
    problems.push(`${name}: the backlog (peak ${backlogPeak}) never drained back to ${backlogBefore}`);
  else if (drainSpeedup !== null && drainSpeedup < DRAIN_SPEEDUP)
    problems.push(
      `${name}: the backlog drained ${excess} in ${drainedAfterS.toFixed(1)} s, ${drainSpeedup.toFixed(1)}× the arrival rate (at least ${DRAIN_SPEEDUP}× required)`,
    );
  return {
    kind: fault.kind,
    startedAt: round(fault.startedAt),
    durationS: round(fault.endedAt - fault.startedAt),
    ackFailures,
    backlogPeak,
    backlogBefore,
    drainedAfterS: drainedAfterS === null ? null : round(drainedAfterS),
    drainSpeedup: drainSpeedup === null ? null : round(drainSpeedup),
    problems,
  };
}

const round = (value: number) => Math.round(value * 10) / 10;

/** What the fault schedule acts on: the running soak's runtime and forward backend. */
export interface FaultTargets {
  origin: () => string;
  kill: () => Promise<void>;
  stop: () => Promise<void>;
  start: () => Promise<void>;
  destinationDown: (down: boolean) => void;
}

/** The deployment's secrets plus LOCAL_DEVELOPMENT, without which the outage switch and the restart requeue are refused. */
export function faultableDeployment(deployment: ReceiverDeployment, stateDir: string): ReceiverDeployment {
  const envFile = join(stateDir, "bench-faults.env");
  writeFileSync(envFile, `${readFileSync(deployment.envFile, "utf8")}LOCAL_DEVELOPMENT=true\n`, { mode: 0o600 });
  return { ...deployment, envFile };
}

/**
 * Plays the faults at their times (seconds after `startedAt`, a performance.now() value) and returns when each began
 * and ended, in seconds from `startedAt`. `log` prints one line per step.
 */
export async function playFaults(
  faults: readonly FaultSpec[],
  targets: FaultTargets,
  startedAt: number,
  log: (line: string) => void,
): Promise<Array<{ kind: FaultKind; startedAt: number; endedAt: number }>> {
  const now = () => (performance.now() - startedAt) / 1000;
  const played: Array<{ kind: FaultKind; startedAt: number; endedAt: number }> = [];
  for (const fault of faults) {
    const wait = fault.atS - now();
    if (wait > 0) await sleep(wait * 1000);
    let began = now();
    let ended = began;
    log(`fault ${fault.kind} begins at ${began.toFixed(1)} s`);
    switch (fault.kind) {
      case "d1":
      case "r2": {
        // The Worker ends the outage itself `forS` after it took the switch: the switch's answer is the start, and
        // the end is that plus the duration (the switch-off after it only makes sure, and may answer late).
        await switchOutage(targets.origin(), fault.kind, fault.forS * 1000);
        const answered = now();
        if (answered - began > 1)
          log(`fault ${fault.kind}: the switch answered after ${(answered - began).toFixed(1)} s`);
        began = answered;
        await sleep(fault.forS * 1000);
        ended = now();
        await switchOutage(targets.origin(), fault.kind, 0);
        break;
      }
      case "destination":
        targets.destinationDown(true);
        await sleep(Math.max(0, fault.atS + fault.forS - now()) * 1000);
        targets.destinationDown(false);
        ended = now();
        break;
      case "kill":
      case "restart":
        await (fault.kind === "kill" ? targets.kill() : targets.stop());
        if (fault.forS > 0) await sleep(fault.forS * 1000);
        await targets.start();
        // Acknowledgements answer again from here; the queue's refill is recovery, measured by the drain.
        ended = now();
        await requeueAfterRestart(targets.origin());
        break;
    }
    log(`fault ${fault.kind} ends at ${ended.toFixed(1)} s (${(ended - began).toFixed(1)} s)`);
    played.push({ kind: fault.kind, startedAt: began, endedAt: ended });
  }
  return played;
}

/** The switch in src/lib/local-faults.ts, through wrangler dev's scheduled hook; retried, and loud when refused. */
async function switchOutage(origin: string, kind: "d1" | "r2", durationMs: number): Promise<void> {
  const cron = encodeURIComponent(`local-fault:${kind}:${durationMs}`);
  let last = "";
  for (let tries = 0; tries < 10; tries++) {
    try {
      const response = await fetch(`${origin}/cdn-cgi/local/scheduled?cron=${cron}`, {
        signal: AbortSignal.timeout(30_000),
      });
      last = `${response.status} ${(await response.text()).slice(0, 200)}`;
      if (response.ok) return;
    } catch (error) {
      last = error instanceof Error ? error.message : String(error);
    }
    await sleep(500);
  }
  throw new Error(`faults: the ${kind} outage switch did not answer 2xx (${last}); see the runtime's log`);
}

/**
 * What `npm start` asks after every start of wrangler dev (scripts/dev.mjs): its queue lived in memory and died with
 * the process, so unfinished receipts go back on it (src/reconcile/restart-requeue.ts).
 */
async function requeueAfterRestart(origin: string): Promise<void> {
  for (let tries = 0; tries < 10; tries++) {
    try {
      const response = await fetch(`${origin}/cdn-cgi/local/scheduled?cron=local-restart-requeue`, {
        signal: AbortSignal.timeout(60_000),
      });
      await response.arrayBuffer();
      if (response.ok) return;
    } catch {
      // still starting: ask again
    }
    await sleep(1000);
  }
  throw new Error("faults: the restart requeue never answered 2xx after a restart");
}
