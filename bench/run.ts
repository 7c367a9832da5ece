#!/usr/bin/env node
/**
 * `npm run bench`: the receiver on local workerd (wrangler dev, persisted state), driven over HTTP by a
 * simulated at-least-once sender whose every delivery is signed by the `standardwebhooks` library.
 * Phases: correctness simulation with a naive control, crash recovery under SIGKILL, side-by-side
 * performance against a bare Worker, and a cost model. `--check` runs the correctness phases only and exits 1
 * when any correctness number is wrong; it never asserts speed.
 */
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import { join, resolve } from "node:path";
import { crashPhase } from "./lib/crash-phase.ts";
import { startFanOutRun } from "./lib/fan-out-run.ts";
import { type BenchFlags, FlagError, parseFlags } from "./lib/flags.ts";
import type { PhaseContext } from "./lib/happy-path.ts";
import { metersPhase } from "./lib/meters-phase.ts";
import { type CpuMs, cpuMsPer, type LevelResult, measureLevel } from "./lib/perf.ts";
import { logPlanWrites } from "./lib/plan-writes.ts";
import { poisonPhase } from "./lib/poison-phase.ts";
import { freePort, type Runtime } from "./lib/runtime.ts";
import { Sender } from "./lib/sender.ts";
import {
  bareRuntime,
  FLOOR_RPC_PATH,
  FLOOR_WRITE_PATH,
  heldBackDeployment,
  type ReceiverDeployment,
  receiverRuntime,
  snapshotReceiver,
} from "./lib/setup.ts";
import { simPhase } from "./lib/sim-phase.ts";
import type { SoakResult } from "./lib/soak.ts";
import { soakPhase } from "./lib/soak-phase.ts";
import { ReceiptStore } from "./lib/store.ts";
import { waitUntilFinished } from "./lib/wait.ts";

const results: Record<string, unknown> = {};

/** The port at `offset` from the base, or a free one when no base is fixed. */
async function portAt(flags: BenchFlags, offset: number): Promise<number> {
  return flags.portBase === null ? freePort() : flags.portBase + offset;
}
const failures: string[] = [];
const runtimes: Runtime[] = [];
/** Local servers the phases started (the forward backend), closed at shutdown. */
const closers: Array<() => Promise<void>> = [];

async function main(flags: BenchFlags): Promise<void> {
  const stateDir = resolve(flags.stateDir);
  mkdirSync(stateDir, { recursive: true });
  printHeader(flags, stateDir);
  const deployment = snapshotReceiver(stateDir);
  // The simulation and the crash run also drive a source with several routes, two of them forwarding here.
  const fanOut =
    flags.phases.has("sim") || flags.phases.has("crash") ? await startFanOutRun(deployment, closers) : null;

  let receiver: Runtime | null = null;
  if (flags.phases.has("sim") || flags.phases.has("perf")) {
    receiver = receiverRuntime(
      fanOut?.deployment ?? deployment,
      stateDir,
      "receiver",
      await portAt(flags, 0),
      await portAt(flags, 10),
    );
    runtimes.push(receiver);
    if (flags.phases.has("sim")) logPlanWrites(new ReceiptStore(receiver.options.persistDir));
    await receiver.start();
  }
  const context: PhaseContext = { failures, runtimes, portAt: (offset) => portAt(flags, offset) };
  if (flags.phases.has("meters")) results.meters = await metersPhase(flags, deployment, stateDir, context);
  if (flags.phases.has("sim")) Object.assign(results, await simPhase(flags, deployment, receiver!, fanOut!, context));
  if (flags.phases.has("crash")) results.crash = await crashPhase(flags, deployment, stateDir, fanOut!, context);
  if (flags.phases.has("poison")) results.poison = await poisonPhase(deployment, stateDir, context);
  if (flags.phases.has("perf")) await sideBySide(flags, deployment, receiver!, stateDir);
  if (flags.phases.has("soak")) results.soak = await soakPhase(flags, deployment, stateDir, context);
}

function printHeader(flags: BenchFlags, stateDir: string): void {
  console.log("edge-webhook-receiver bench (simulated sender, synthetic data, real local runtime)");
  console.log(
    `date: ${new Date().toISOString()}  node: ${process.version}  machine: ${os.cpus()[0]?.model ?? "?"} x${os.cpus().length}, ${Math.round(os.totalmem() / 2 ** 30)} GiB`,
  );
  console.log(`runtime: wrangler dev (workerd) with --persist-to under ${stateDir}`);
  console.log(`seed: ${flags.seed}  sender concurrency: ${flags.senderConcurrency}`);
  console.log(
    `chances: duplicate ${flags.duplicateChance}, response lost after commit ${flags.ackLostChance} (per attempt), ` +
      `concurrent redelivery ${flags.concurrentChance}, shuffled ${flags.shuffleChance} (window ${flags.shuffleWindow}), same-second plan pair ${flags.tieChance}`,
  );
}

/** One target's req/s and latencies over another's, side by side at one concurrency. */
interface RatioResult {
  requestsPerSecond: number;
  p50: number;
  p95: number;
  p99: number;
}

function ratioOf(result: LevelResult, base: LevelResult): RatioResult {
  return {
    requestsPerSecond: result.requestsPerSecond / base.requestsPerSecond,
    p50: result.p50 / base.p50,
    p95: result.p95 / base.p95,
    p99: result.p99 / base.p99,
  };
}

async function sideBySide(
  flags: BenchFlags,
  deployment: ReceiverDeployment,
  receiver: Runtime,
  stateDir: string,
): Promise<void> {
  const bare = bareRuntime(stateDir, await portAt(flags, 1), await portAt(flags, 11));
  const heldBack = receiverRuntime(
    heldBackDeployment(deployment, stateDir),
    stateDir,
    "held-back",
    await portAt(flags, 3),
    await portAt(flags, 13),
  );
  runtimes.push(bare, heldBack);
  await bare.start();
  await heldBack.start();
  console.log(
    `\n== 3. performance: ${flags.perfSeconds} s per target and level after 1 s warm-up, closed loop, one new signed event per request`,
  );
  console.log(
    "(b) is the whole system: its relay and consumer share the runtime. (c) is the ack path alone: the same receiver with its relay held back.",
  );
  console.log(
    "(d) and (e) are the floor of one Durable Object call before the 2xx: the bare Worker making one RPC with the body to a trivial object, " +
      "(d) storing nothing, (e) inserting one row before it answers. (c), (d) and (e) start once (b)'s events are processed.",
  );
  const levels: Array<{
    bare: LevelResult;
    receiver: LevelResult;
    ackOnly: LevelResult;
    doCall: LevelResult;
    doWrite: LevelResult;
    ratios: Record<string, RatioResult>;
    /** (b)'s CPU from its warm-up until every event it accepted was processed, per event: its whole life. */
    receiverLifetimeCpuMsPerEvent: CpuMs;
  }> = [];
  const header = `${"concurrency".padEnd(12)}${"target".padEnd(26)}${"req/s".padStart(9)}${"p50 ms".padStart(9)}${"p95 ms".padStart(9)}${"p99 ms".padStart(9)}${"non-2xx".padStart(9)}`;
  console.log(header);
  const print = (result: LevelResult) =>
    console.log(
      `${String(result.concurrency).padEnd(12)}${result.target.padEnd(26)}${result.requestsPerSecond.toFixed(0).padStart(9)}` +
        `${result.p50.toFixed(1).padStart(9)}${result.p95.toFixed(1).padStart(9)}${result.p99.toFixed(1).padStart(9)}${String(result.non2xx).padStart(9)}`,
    );
  const printRatio = (label: string, result: LevelResult, base: LevelResult): RatioResult => {
    const ratio = ratioOf(result, base);
    console.log(
      `${"".padEnd(12)}${label.padEnd(26)}${ratio.requestsPerSecond.toFixed(2).padStart(9)}` +
        `${ratio.p50.toFixed(1).padStart(9)}${ratio.p95.toFixed(1).padStart(9)}${ratio.p99.toFixed(1).padStart(9)}`,
    );
    return ratio;
  };
  const receiverStore = new ReceiptStore(receiver.options.persistDir);
  for (const concurrency of flags.perfLevels) {
    const common = {
      path: "/webhooks/demo",
      secret: deployment.demoSecret,
      concurrency,
      seconds: flags.perfSeconds,
      accountPrefix: "perf_acct_",
    };
    const bareCpu = () => bare.cpuSeconds();
    const bareResult = await measureLevel({
      ...common,
      target: "(a) bare Worker",
      origin: bare.origin,
      keyPrefix: `perf_bare_c${concurrency}_`,
      cpu: bareCpu,
    });
    print(bareResult);
    const receiverCpuBefore = receiver.cpuSeconds();
    const receiverResult = await measureLevel({
      ...common,
      target: "(b) receiver, whole system",
      origin: receiver.origin,
      keyPrefix: `perf_ack_c${concurrency}_`,
      cpu: () => receiver.cpuSeconds(),
    });
    print(receiverResult);
    // The whole system goes on relaying and processing what (b) accepted: let it finish first, or that background
    // work on the shared cores would be measured as the cost of the targets after it.
    await waitUntilFinished(receiverStore, `perf_ack_c${concurrency}_`, receiverResult.handled, {
      origin: () => receiver.origin,
      stallMs: 5000,
      cronAfterMs: 60_000,
    });
    const receiverLifetimeCpu = cpuMsPer(receiverCpuBefore, receiver.cpuSeconds(), receiverResult.handled);
    const ackOnlyResult = await measureLevel({
      ...common,
      target: "(c) receiver, ack path alone",
      origin: heldBack.origin,
      keyPrefix: `perf_held_c${concurrency}_`,
      cpu: () => heldBack.cpuSeconds(),
    });
    print(ackOnlyResult);
    const doCallResult = await measureLevel({
      ...common,
      target: "(d) bare + one DO call",
      origin: bare.origin,
      path: FLOOR_RPC_PATH,
      keyPrefix: `perf_floor_rpc_c${concurrency}_`,
      cpu: bareCpu,
    });
    print(doCallResult);
    const doWriteResult = await measureLevel({
      ...common,
      target: "(e) bare + DO call + row",
      origin: bare.origin,
      path: FLOOR_WRITE_PATH,
      keyPrefix: `perf_floor_row_c${concurrency}_`,
      cpu: bareCpu,
    });
    print(doWriteResult);
    const ratios = {
      "(b)/(a)": printRatio("(b)/(a)", receiverResult, bareResult),
      "(c)/(a)": printRatio("(c)/(a)", ackOnlyResult, bareResult),
      "(d)/(a)": printRatio("(d)/(a)", doCallResult, bareResult),
      "(e)/(a)": printRatio("(e)/(a)", doWriteResult, bareResult),
      "(c)/(e)": printRatio("(c)/(e)", ackOnlyResult, doWriteResult),
      "(b)/(e)": printRatio("(b)/(e)", receiverResult, doWriteResult),
    };
    const cpuLine = (label: string, cpu: CpuMs | null) =>
      console.log(
        `${"".padEnd(12)}${label.padEnd(44)}${(cpu?.workerd ?? NaN).toFixed(2).padStart(9)}${(cpu?.wrangler ?? NaN).toFixed(2).padStart(11)}`,
      );
    console.log(
      `${"".padEnd(12)}${"CPU ms per event (warm-up included)".padEnd(44)}${"workerd".padStart(9)}${"wrangler".padStart(11)}`,
    );
    cpuLine("(a) bare Worker", bareResult.cpuMsPerEvent);
    cpuLine("(b) whole system, while acknowledging", receiverResult.cpuMsPerEvent);
    cpuLine("(b) whole system, until processed", receiverLifetimeCpu);
    cpuLine("(c) ack path alone", ackOnlyResult.cpuMsPerEvent);
    cpuLine("(e) bare + DO call + row", doWriteResult.cpuMsPerEvent);
    levels.push({
      bare: bareResult,
      receiver: receiverResult,
      ackOnly: ackOnlyResult,
      doCall: doCallResult,
      doWrite: doWriteResult,
      ratios,
      receiverLifetimeCpuMsPerEvent: receiverLifetimeCpu,
    });
  }
  // Held back means nothing reached D1: a relayed claim would mean (c) measured relay and consumer work as well.
  const ackOnlyRelayed = [...new ReceiptStore(heldBack.options.persistDir).statusCounts("perf_held_").values()].reduce(
    (sum, count) => sum + count,
    0,
  );
  console.log(`(c)'s runtime relayed ${ackOnlyRelayed} of its claims to D1 while it was measured (held back: 0)`);
  if (ackOnlyRelayed > 0)
    failures.push(
      `perf: the ack-path-alone runtime relayed ${ackOnlyRelayed} claims, so (c) is not the ack path alone`,
    );
  await heldBack.stop();

  // End to end: fresh events at the highest level, timed from the first send until every one is processed.
  const store = new ReceiptStore(receiver.options.persistDir);
  await waitUntilFinished(store, "perf_ack_", Number.MAX_SAFE_INTEGER, {
    origin: () => receiver.origin,
    stallMs: 5000,
    cronAfterMs: 60_000,
  });
  const concurrency = Math.max(...flags.perfLevels);
  const sender = new Sender({
    origin: receiver.origin,
    path: "/webhooks/demo",
    secret: deployment.demoSecret,
    maxSockets: concurrency,
  });
  const startedAt = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let n = next++; n < flags.e2eEvents; n = next++) {
        const body = JSON.stringify({
          type: "account.credited",
          data: { account: `e2e_acct_${String(n % 500).padStart(4, "0")}`, amount: 100 },
        });
        for (;;) {
          const outcome = await sender.deliver(`e2e_evt_${n}`, body);
          if (outcome.status !== "error" && outcome.status >= 200 && outcome.status < 300) break;
        }
      }
    }),
  );
  const ackedMs = performance.now() - startedAt;
  sender.close();
  const waited = await waitUntilFinished(store, "e2e_evt_", flags.e2eEvents, {
    origin: () => receiver.origin,
    startedAt,
  });
  // Commit times of the run's receipts: the consumers' own pace, from the first commit to the last, without the
  // relay delay the last partial batch waits out after the last acknowledgement.
  const commits = store.read(
    (database) =>
      database
        .prepare(
          "SELECT MIN(processed_at) AS first, MAX(processed_at) AS last FROM receipts WHERE event_key LIKE 'e2e_evt_%'",
        )
        .get() as {
        first: number;
        last: number;
      },
  );
  const ackedPerSecond = (flags.e2eEvents / ackedMs) * 1000;
  const sustainedPerSecond = (waited.finished / Math.max(1, commits.last - commits.first)) * 1000;
  const e2e = {
    events: flags.e2eEvents,
    concurrency,
    ackedSeconds: ackedMs / 1000,
    processedSeconds: waited.elapsedMs / 1000,
    ackedPerSecond,
    eventsPerSecond: (waited.finished / waited.elapsedMs) * 1000,
    sustainedPerSecond,
    finished: waited.finished,
    /** Processed per second over acknowledged per second, side by side in one run, the relay delay's tail included. */
    processedToAckedRatio: ((waited.finished / waited.elapsedMs) * 1000) / ackedPerSecond,
    /** The same from the first commit to the last: whether processing keeps pace while events arrive (>= 0.8). */
    sustainedToAckedRatio: sustainedPerSecond / ackedPerSecond,
  };
  console.log(
    `end to end: ${e2e.events} events at concurrency ${concurrency}: all acknowledged after ${e2e.ackedSeconds.toFixed(1)} s ` +
      `(${e2e.ackedPerSecond.toFixed(0)} acks/s), ${e2e.finished} processed after ${e2e.processedSeconds.toFixed(1)} s ` +
      `(${e2e.eventsPerSecond.toFixed(0)} events/s until every event is processed); processed/acknowledged = ${e2e.processedToAckedRatio.toFixed(2)}; ` +
      `from the first commit to the last ${e2e.sustainedPerSecond.toFixed(0)} events/s, = ${e2e.sustainedToAckedRatio.toFixed(2)} of the ack rate`,
  );
  const memory = { receiverPeakRssMiB: receiver.peakRssMiB(), bareWorkerPeakRssMiB: bare.peakRssMiB() };
  console.log(
    `peak RSS (VmHWM of the largest workerd process): receiver ${memory.receiverPeakRssMiB.toFixed(0)} MiB, bare Worker ${memory.bareWorkerPeakRssMiB.toFixed(0)} MiB`,
  );
  results.performance = { levels, e2e, memory, ackOnlyRelayed };
}

async function shutdown(keepState: boolean, stateDir: string): Promise<void> {
  await Promise.all(runtimes.map((runtime) => runtime.stop().catch(() => undefined)));
  await Promise.all(closers.map((close) => close().catch(() => undefined)));
  if (!keepState) rmSync(resolve(stateDir), { recursive: true, force: true });
}

let flags: BenchFlags;
try {
  flags = parseFlags(process.argv.slice(2));
} catch (error) {
  if (error instanceof FlagError) {
    console.error(`bench: ${error.message}`);
    process.exit(2);
  }
  throw error;
}
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    void shutdown(flags.keepState, flags.stateDir).finally(() => process.exit(130));
  });
}
let crashed: unknown = null;
try {
  await main(flags);
} catch (error) {
  crashed = error;
}
await shutdown(flags.keepState || crashed !== null, flags.stateDir);
if (flags.jsonOut) {
  // The meters phase's figures stand at the top ({perEvent, usdPerMillion}), so a script can read them directly.
  const meters = results.meters as
    | { perEvent?: unknown; usdPerMillion?: number; allIn?: { allInUsdPerMillion: number } }
    | undefined;
  const soakResult = results.soak as SoakResult | undefined;
  const top = {
    ...(meters
      ? {
          perEvent: meters.perEvent,
          usdPerMillion: meters.usdPerMillion,
          // --meters-after-only measures no demo source: its figures are under meters.after.
          allInUsdPerMillion: meters.allIn?.allInUsdPerMillion,
        }
      : {}),
    // The soak's samples, verdict and losses stand at the top too: {"samples": [...], "steady": …, "lost": 0}.
    // With --faults, also {faults: [{kind, startedAt, durationS, ackFailures, backlogPeak, drainedAfterS, …}]}.
    ...(soakResult
      ? {
          samples: soakResult.samples,
          steady: soakResult.steady,
          lost: soakResult.lost,
          duplicates: soakResult.duplicated,
          unfinished: soakResult.unfinished,
          dead: soakResult.dead,
        }
      : {}),
    ...(soakResult && soakResult.faults.length > 0 ? { faults: soakResult.faults } : {}),
  };
  writeFileSync(
    flags.jsonOut,
    JSON.stringify({ ...top, flags: { ...flags, phases: [...flags.phases] }, results, failures }, null, 2),
  );
}
if (crashed) {
  console.error(
    `\nbench failed: ${crashed instanceof Error ? crashed.stack : String(crashed)}\nstate kept in ${join(resolve(flags.stateDir))}`,
  );
  process.exit(1);
}
if (failures.length > 0) {
  console.error(`\nCORRECTNESS FAILURES:\n  ${failures.join("\n  ")}`);
  process.exit(1);
}
console.log(flags.check ? "\ncheck passed: every correctness number is right" : "\ndone");
