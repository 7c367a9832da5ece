import { FAULTS_HELP, type FaultSpec, parseFaults } from "./faults.ts";
import type { SoakSettings } from "./soak.ts";

/** Command-line flags of `npm run bench`. Every rate and size the document names is a flag. */

export interface BenchFlags {
  events: number;
  accounts: number;
  seed: number;
  creditShare: number;
  tieChance: number;
  duplicateChance: number;
  ackLostChance: number;
  concurrentChance: number;
  shuffleChance: number;
  shuffleWindow: number;
  /** Deliveries the simulated sender keeps in flight. */
  senderConcurrency: number;
  /** The same for the meters phase, where batching under load is what is measured. */
  metersConcurrency: number;
  /** The meters phase's per-event figures file (bench/lib/per-event-file.ts), relative to the working directory. */
  perEventOut: string;
  /** The meters phase's all-in figure: the share of events whose body is above the R2 threshold. */
  largeShare: number;
  crashEvents: number;
  /** The share of the simulation's and the crash run's events sent alongside to the fan-out source. */
  fanOutShare: number;
  kills: number;
  cronLeadMinutes: number;
  perfSeconds: number;
  perfLevels: number[];
  e2eEvents: number;
  /** The latency phase: arrival rates in events per second, and seconds of arrivals at each. */
  latencyRates: number[];
  latencySeconds: number;
  /** The held-work phase: the backlog given at once to each controlled route. */
  heldEvents: number;
  phases: Set<Phase>;
  check: boolean;
  keepState: boolean;
  /** The meters phase measures only the after source (issue 35), keeping the before figures of the file it rewrites. */
  metersAfterOnly: boolean;
  stateDir: string;
  jsonOut: string | null;
  /** null: pick free ports (the default with --check, so a CI run never collides with a bench in progress). */
  portBase: number | null;
  /** The soak phase: arrivals per second, minutes, the soak source's retention, seconds between cron runs. */
  soak: SoakSettings;
}

export type Phase = "sim" | "crash" | "poison" | "perf" | "meters" | "soak" | "latency" | "held";

const HELP = `npm run bench -- [flags]
  --events N            simulation events (default 10000; 500 with --check)
  --accounts N          accounts (default events/20, between 20 and 500)
  --seed N              fault and workload seed (default 20261023)
  --credit-share P      share of account.credited events (0.6)
  --tie P               chance a plan change gets a same-second follow-up (0.05)
  --dup P               duplicate delivered later (0.03)
  --ack-lost P          response lost after commit, sender retries (0.02, drawn per attempt)
  --concurrent P        first delivery arrives twice at once (0.01)
  --shuffle P           delivery moved within the window (0.10)
  --shuffle-window N    positions (20)
  --sender-concurrency N deliveries in flight (16; the meters phase uses 64 unless given)
  --crash-events N      events in the crash-recovery run (2000; 300 with --check)
  --fan-out-share P     sim and crash: events sent alongside, with the same faults, to a source with three routes
                        (a handler, a forward, a forward filtered to credits), as a share of the phase's (0.2, at least 20)
  --kills N             SIGKILLs of the runtime during that run (5; 2 with --check)
  --cron-lead-minutes M after the crashes, fire the cron as if M minutes later (11: past the 5 min lease
                        and the 10 min overdue grace of the re-drive)
  --perf-seconds S      measured seconds per target and concurrency (5)
  --perf-levels a,b,c   concurrency levels (1,16,64)
  --e2e-events N        events for the end-to-end throughput run (5000)
  --latency-rates a,b   latency: arrival rates in events per second (1,100)
  --latency-seconds S   latency: seconds of arrivals at each rate (30)
  --held-events N       held: the backlog sent at once to a rate-limited and an in-flight-capped route (30)
  --only sim,crash,poison,perf,meters,soak,latency,held
                        phases to run (default all but soak; --check runs sim, crash and poison: real SIGKILLs). poison: one event
                        whose attempt never returns, killed with the runtime until it is dead, its batch-mates applied once. meters: billed units per event from
                        the receiver's own meters, for --events happy-path events (default 2000 there). soak: a
                        fixed arrival rate for a while with retention scaled down, sampled every 30 s. latency:
                        send to processed, p50 and p99, open loop at each --latency-rates. held: the pace of a
                        backlog through rate_limit = "5/s" and max_in_flight = 1
  --large-share P       meters: share of events with a body above the R2 threshold, for the all-in figure (0.01)
  --per-event-out FILE  meters: where the per-event figures the capacity model reads go (bench/results/per-event.json)
  --rate R              soak: events per second (20)
  --minutes M           soak: minutes of arrivals (10)
  --payload-retention D soak: the soak source's payload retention ("1m")
  --dedupe-retention D  soak: its dedupe retention ("3m")
  --cron-seconds S      soak: seconds between cron runs fired by the bench (60)
${FAULTS_HELP}
  --check               assert correctness only (never speed); exit 1 on any wrong number
  --state-dir DIR       where runtime state goes (default .bench/state-<time>)
  --keep-state          keep the state directories afterwards
  --meters-after-only   meters: only the source configured the issue 35 way (segments, partitions); the file's
                        before figures are kept
  --json FILE           also write every number as JSON
  --port-base N         first of the ports used (8820, base..base+17; with --check free ports are picked)`;

export function parseFlags(argv: readonly string[]): BenchFlags {
  const given = new Map<string, string>();
  const switches = new Set<string>();
  for (let index = 0; index < argv.length; index++) {
    const arg = argv[index]!;
    if (arg === "--help" || arg === "-h") {
      console.log(HELP);
      process.exit(0);
    }
    if (!arg.startsWith("--")) throw new FlagError(`unexpected argument ${JSON.stringify(arg)}`);
    const [name, inline] = arg.slice(2).split("=", 2) as [string, string | undefined];
    if (name === "check" || name === "keep-state" || name === "meters-after-only") {
      switches.add(name);
      continue;
    }
    const value = inline ?? argv[++index];
    if (value === undefined) throw new FlagError(`--${name} needs a value`);
    given.set(name, value);
  }
  const check = switches.has("check");
  const known = new Set([
    "events",
    "accounts",
    "seed",
    "credit-share",
    "tie",
    "dup",
    "ack-lost",
    "concurrent",
    "shuffle",
    "shuffle-window",
    "sender-concurrency",
    "crash-events",
    "fan-out-share",
    "kills",
    "cron-lead-minutes",
    "perf-seconds",
    "perf-levels",
    "e2e-events",
    "latency-rates",
    "latency-seconds",
    "held-events",
    "only",
    "state-dir",
    "json",
    "port-base",
    "large-share",
    "per-event-out",
    "rate",
    "minutes",
    "payload-retention",
    "dedupe-retention",
    "cron-seconds",
    "faults",
  ]);
  for (const name of given.keys()) if (!known.has(name)) throw new FlagError(`unknown flag --${name} (see --help)`);

  const integer = (name: string, fallback: number, min: number): number => {
    const raw = given.get(name);
    if (raw === undefined) return fallback;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < min) throw new FlagError(`--${name} must be an integer >= ${min}`);
    return value;
  };
  const chance = (name: string, fallback: number): number => {
    const raw = given.get(name);
    if (raw === undefined) return fallback;
    const value = Number(raw);
    if (!Number.isFinite(value) || value < 0 || value > 1) throw new FlagError(`--${name} must be between 0 and 1`);
    return value;
  };

  const phases = new Set<Phase>();
  for (const phase of (given.get("only") ?? (check ? "sim,crash,poison" : "sim,crash,poison,perf,meters")).split(",")) {
    if (
      phase !== "sim" &&
      phase !== "crash" &&
      phase !== "poison" &&
      phase !== "perf" &&
      phase !== "meters" &&
      phase !== "soak" &&
      phase !== "latency" &&
      phase !== "held"
    )
      throw new FlagError(`--only: unknown phase ${phase}`);
    phases.add(phase);
  }
  const onlyMeters = phases.size === 1 && phases.has("meters");
  const events = integer("events", check ? 500 : onlyMeters ? 2000 : 10_000, 1);
  const duration = (name: string, fallback: string): string => {
    const value = given.get(name) ?? fallback;
    if (!/^\d+(s|m|h)$/.test(value) || /^0+[smh]$/.test(value))
      throw new FlagError(`--${name} must be a duration like "90s", "3m" or "1h"`);
    return value;
  };
  const rate = Number(given.get("rate") ?? 20);
  if (!Number.isFinite(rate) || rate <= 0 || rate > 10_000)
    throw new FlagError("--rate must be a number of events per second between 0 and 10000");
  const perfLevels = (given.get("perf-levels") ?? "1,16,64").split(",").map(Number);
  if (perfLevels.some((level) => !Number.isInteger(level) || level < 1 || level > 512)) {
    throw new FlagError("--perf-levels must be integers between 1 and 512");
  }
  const latencyRates = (given.get("latency-rates") ?? "1,100").split(",").map(Number);
  if (latencyRates.some((level) => !Number.isFinite(level) || level <= 0 || level > 1000)) {
    throw new FlagError("--latency-rates must be events per second above 0 and at most 1000");
  }
  const minutes = integer("minutes", 10, 1);
  let faults: FaultSpec[] = [];
  try {
    faults = parseFaults(given.get("faults") ?? "", minutes);
  } catch (error) {
    throw new FlagError((error as Error).message);
  }
  if (faults.length > 0 && !phases.has("soak")) throw new FlagError("--faults plays during the soak: add --only soak");
  return {
    events,
    accounts: integer("accounts", Math.min(500, Math.max(20, Math.floor(events / 20))), 1),
    seed: integer("seed", 20261023, 0),
    creditShare: chance("credit-share", 0.6),
    tieChance: chance("tie", 0.05),
    duplicateChance: chance("dup", 0.03),
    ackLostChance: chance("ack-lost", 0.02),
    concurrentChance: chance("concurrent", 0.01),
    shuffleChance: chance("shuffle", 0.1),
    shuffleWindow: integer("shuffle-window", 20, 0),
    senderConcurrency: integer("sender-concurrency", 16, 1),
    metersConcurrency: integer("sender-concurrency", 64, 1),
    largeShare: chance("large-share", 0.01),
    perEventOut: given.get("per-event-out") ?? "bench/results/per-event.json",
    crashEvents: integer("crash-events", check ? 300 : 2000, 1),
    fanOutShare: chance("fan-out-share", 0.2),
    kills: integer("kills", check ? 2 : 5, 0),
    cronLeadMinutes: integer("cron-lead-minutes", 11, 0),
    perfSeconds: integer("perf-seconds", 5, 1),
    perfLevels,
    e2eEvents: integer("e2e-events", 5000, 1),
    latencyRates,
    latencySeconds: integer("latency-seconds", 30, 1),
    heldEvents: integer("held-events", 30, 2),
    phases,
    check,
    keepState: switches.has("keep-state"),
    metersAfterOnly: switches.has("meters-after-only"),
    stateDir: given.get("state-dir") ?? `.bench/state-${new Date().toISOString().replace(/[:.]/g, "-")}`,
    jsonOut: given.get("json") ?? null,
    portBase: given.has("port-base") || !check ? integer("port-base", 8820, 1024) : null,
    soak: {
      rate,
      minutes,
      payloadRetention: duration("payload-retention", "1m"),
      dedupeRetention: duration("dedupe-retention", "3m"),
      cronSeconds: integer("cron-seconds", 60, 5),
      faults,
    },
  };
}

export class FlagError extends Error {
  name = "FlagError";
}
