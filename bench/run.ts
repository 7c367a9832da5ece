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
import { setTimeout as sleep } from "node:timers/promises";
import { costModel, formatCost, type RunCounts } from "./lib/cost.ts";
import {
  FAN_OUT_SOURCE,
  fanOutSource,
  formatRouteCounts,
  forwardRouteCounts,
  type RouteCount,
  routeProblems,
  routeTakes,
} from "./lib/fan-out.ts";
import { type BenchFlags, FlagError, parseFlags } from "./lib/flags.ts";
import { startForwardBackend } from "./lib/forward-backend.ts";
import type { PhaseContext } from "./lib/happy-path.ts";
import { metersPhase } from "./lib/meters-phase.ts";
import { type CpuMs, cpuMsPer, type LevelResult, measureLevel } from "./lib/perf.ts";
import { logPlanWrites } from "./lib/plan-writes.ts";
import { poisonPhase } from "./lib/poison-phase.ts";
import { mulberry32 } from "./lib/random.ts";
import { freePort, type Runtime } from "./lib/runtime.ts";
import { Sender } from "./lib/sender.ts";
import {
  bareRuntime,
  deploymentWithSource,
  FLOOR_RPC_PATH,
  FLOOR_WRITE_PATH,
  heldBackDeployment,
  type ReceiverDeployment,
  receiverRuntime,
  snapshotReceiver,
} from "./lib/setup.ts";
import type { SoakResult } from "./lib/soak.ts";
import { soakPhase } from "./lib/soak-phase.ts";
import { ReceiptStore } from "./lib/store.ts";
import { playSchedule } from "./lib/stream.ts";
import { correctnessProblems, formatTable, naiveVerdict, receiverVerdict, type VerdictRow } from "./lib/verdict.ts";
import { waitUntilFinished } from "./lib/wait.ts";
import { makeWorkload, scheduleDeliveries, type Workload } from "./lib/workload.ts";

const results: Record<string, unknown> = {};

/** The port at `offset` from the base, or a free one when no base is fixed. */
async function portAt(flags: BenchFlags, offset: number): Promise<number> {
  return flags.portBase === null ? freePort() : flags.portBase + offset;
}
const failures: string[] = [];
const runtimes: Runtime[] = [];
/** Local servers the phases started (the forward backend), closed at shutdown. */
const closers: Array<() => Promise<void>> = [];

/** The fan-out source of the simulation and the crash run: its deployment, and the backend its forwards reach. */
interface FanOutRun {
  backend: Awaited<ReturnType<typeof startForwardBackend>>;
  deployment: ReceiverDeployment;
}

async function main(flags: BenchFlags): Promise<void> {
  const stateDir = resolve(flags.stateDir);
  mkdirSync(stateDir, { recursive: true });
  printHeader(flags, stateDir);
  const deployment = snapshotReceiver(stateDir);
  // The simulation and the crash run also drive a source with several routes, two of them forwarding here.
  let fanOut: FanOutRun | null = null;
  if (flags.phases.has("sim") || flags.phases.has("crash")) {
    const backend = await startForwardBackend();
    closers.push(backend.close);
    fanOut = {
      backend,
      deployment: deploymentWithSource(
        deployment,
        "fan-out",
        FAN_OUT_SOURCE,
        fanOutSource(backend.port, "account.credited"),
      ),
    };
  }

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
  if (flags.phases.has("sim")) await simulation(flags, deployment, receiver!, fanOut!);
  if (flags.phases.has("crash")) await crashRecovery(flags, deployment, stateDir, fanOut!);
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

/**
 * The fan-out source's share of a phase (--fan-out-share of its events, at least 20), played alongside the demo
 * source's stream with the same faults at a quarter of its concurrency: the routes' verdict comes from the same run.
 */
function fanOutStream(
  flags: BenchFlags,
  deployment: ReceiverDeployment,
  origin: string,
  events: number,
  keyPrefix: string,
  accountPrefix: string,
  timeoutMs?: number,
) {
  const workload = makeWorkload(flags, Math.max(20, Math.round(events * flags.fanOutShare)), keyPrefix, accountPrefix);
  const sender = new Sender({
    origin,
    path: `/webhooks/${FAN_OUT_SOURCE}`,
    secret: deployment.demoSecret,
    maxSockets: flags.senderConcurrency,
    ...(timeoutMs ? { timeoutMs } : {}),
  });
  const stream = playSchedule(sender, scheduleDeliveries(flags, workload.events), {
    seed: flags.seed,
    ackLostChance: flags.ackLostChance,
    concurrency: Math.max(2, Math.round(flags.senderConcurrency / 4)),
  }).finally(() => sender.close());
  return { workload, stream, keyPrefix, accountPrefix };
}

/**
 * The fan-out source's verdict once every receipt and delivery of it finished: its ledger route's row (the
 * handler's effect, as the demo source's), and each forward route's count from what the backend received.
 */
function fanOutVerdict(
  phase: string,
  store: ReceiptStore,
  fan: { workload: Workload; keyPrefix: string; accountPrefix: string },
  stream: Awaited<ReturnType<typeof playSchedule>>,
  backend: FanOutRun["backend"],
): { row: VerdictRow; routes: RouteCount[] } {
  const row = {
    ...receiverVerdict(store, fan.workload, stream, fan.keyPrefix, fan.accountPrefix, FAN_OUT_SOURCE),
    handler: "fan-out: ledger route",
  };
  const routes = forwardRouteCounts(store, fan.workload, backend.seen(), fan.keyPrefix, routeTakes("account.credited"));
  assertCorrect(`${phase} (fan-out source, ledger route)`, row);
  for (const count of routes)
    for (const problem of routeProblems(count)) failures.push(`${phase} (fan-out source): ${problem}`);
  if (stream.abandoned > 0) failures.push(`${phase}: the sender gave up on ${stream.abandoned} fan-out events`);
  return { row, routes };
}

async function simulation(
  flags: BenchFlags,
  deployment: ReceiverDeployment,
  receiver: Runtime,
  fanOut: FanOutRun,
): Promise<void> {
  const workload = makeWorkload(flags, flags.events, "sim_evt_", "acct_");
  const schedule = scheduleDeliveries(flags, workload.events);
  const credits = workload.events.filter((event) => event.kind === "credit").length;
  const sender = new Sender({
    origin: receiver.origin,
    path: "/webhooks/demo",
    secret: deployment.demoSecret,
    maxSockets: flags.senderConcurrency * 2,
  });
  const startedAt = performance.now();
  const fan = fanOutStream(flags, deployment, receiver.origin, flags.events, "fansim_evt_", "fansim_acct_");
  console.log(
    `\n== 1. correctness simulation: ${workload.events.length} events (${credits} credit, ${workload.events.length - credits} plan), ` +
      `${flags.accounts} accounts, ${workload.sameSecondPairs} same-second plan pairs, ${schedule.length} scheduled sends; ` +
      `alongside, ${fan.workload.events.length} events to /webhooks/${FAN_OUT_SOURCE} (routes ledger, backend, audit for credits only)`,
  );
  const stream = await playSchedule(sender, schedule, {
    seed: flags.seed,
    ackLostChance: flags.ackLostChance,
    concurrency: flags.senderConcurrency,
  });
  sender.close();
  const fanStream = await fan.stream;
  const store = new ReceiptStore(receiver.options.persistDir);
  const waited = await waitUntilFinished(store, "sim_evt_", workload.events.length, {
    origin: () => receiver.origin,
    startedAt,
  });
  const fanWaited = await waitUntilFinished(store, fan.keyPrefix, fan.workload.events.length, {
    origin: () => receiver.origin,
    startedAt,
    deliveries: true,
  });
  const rows = [receiverVerdict(store, workload, stream, "sim_evt_", "acct_"), naiveVerdict(workload, stream)];
  const fanResult = fanOutVerdict("simulation", store, fan, fanStream, fanOut.backend);
  console.log(formatTable([...rows, fanResult.row]));
  console.log(formatRouteCounts(fanResult.routes));
  console.log(
    `fan-out source: every receipt and further delivery finished ${(fanWaited.elapsedMs / 1000).toFixed(1)} s after the first send; ` +
      `cron fired by the bench: ${fanWaited.cronTriggers}`,
  );
  console.log(
    `sender: ${stream.deliveries} requests in ${(stream.elapsedMs / 1000).toFixed(1)} s (${stream.ackLostResends} resent after a lost response, ` +
      `${stream.connectionErrors} connection errors); every event finished ${(waited.elapsedMs / 1000).toFixed(1)} s ` +
      `after the first send (${((workload.events.length / waited.elapsedMs) * 1000).toFixed(0)} events/s end to end); cron fired by the bench: ${waited.cronTriggers}`,
  );
  console.log(`receipts by status: ${[...waited.counts].map(([status, count]) => `${status} ${count}`).join(", ")}`);
  assertCorrect("simulation", rows[0]!);
  const control = rows[1]!;
  const faultsOn = flags.duplicateChance + flags.concurrentChance + flags.ackLostChance > 0;
  if (faultsOn && flags.events >= 300 && control.duplicateEvents === 0) {
    failures.push("simulation: the naive control shows no fault, so the fault injection is not working");
  }
  results.simulation = {
    rows,
    stream: { ...stream, arrivals: undefined },
    wait: { ...waited, counts: Object.fromEntries(waited.counts) },
    fanOut: { ...fanResult, finishedSeconds: fanWaited.elapsedMs / 1000 },
  };

  const counts: RunCounts = store.read((database) => ({
    accepted: workload.events.length,
    httpDeliveries: stream.deliveries,
    ...(database
      .prepare(
        `SELECT COUNT(DISTINCT relayed_at) AS relayBatches,
           SUM(attempts) AS processingAttempts,
           SUM(CASE WHEN event_type = 'account.plan_changed' THEN 1 ELSE 0 END) AS planEvents
         FROM receipts WHERE source = 'demo' AND event_key LIKE 'sim_evt_%'`,
      )
      .get() as { relayBatches: number; processingAttempts: number; planEvents: number }),
  }));
  const cost = costModel(counts);
  console.log(
    `\n== 4. cost cross-check: derived from the statements and the simulation's counts (the meters phase is the measurement)\n${formatCost(cost)}`,
  );
  results.cost = cost;
}

async function crashRecovery(
  flags: BenchFlags,
  deployment: ReceiverDeployment,
  stateDir: string,
  fanOut: FanOutRun,
): Promise<void> {
  const runtime = receiverRuntime(
    fanOut.deployment,
    stateDir,
    "crash",
    await portAt(flags, 2),
    await portAt(flags, 12),
  );
  runtimes.push(runtime);
  logPlanWrites(new ReceiptStore(runtime.options.persistDir));
  await runtime.start();
  const workload = makeWorkload(flags, flags.crashEvents, "crash_evt_", "crash_acct_");
  const schedule = scheduleDeliveries(flags, workload.events);
  const fan = fanOutStream(
    flags,
    deployment,
    runtime.origin,
    flags.crashEvents,
    "fancrash_evt_",
    "fancrash_acct_",
    10_000,
  );
  console.log(
    `\n== 2. crash recovery: ${workload.events.length} events, and ${fan.workload.events.length} to /webhooks/${FAN_OUT_SOURCE} alongside, ` +
      `${flags.kills} SIGKILLs of the runtime (wrangler + workerd) at seeded random moments`,
  );
  const sender = new Sender({
    origin: runtime.origin,
    path: "/webhooks/demo",
    secret: deployment.demoSecret,
    maxSockets: flags.senderConcurrency * 2,
    timeoutMs: 10_000,
  });
  const startedAt = performance.now();
  const streamDone = playSchedule(sender, schedule, {
    seed: flags.seed,
    ackLostChance: flags.ackLostChance,
    concurrency: flags.senderConcurrency,
  });
  let streaming = true;
  void streamDone.then(
    () => (streaming = false),
    () => (streaming = false),
  );

  const random = mulberry32(flags.seed ^ 0x5eed);
  const killTimes: number[] = [];
  const restartSeconds: number[] = [];
  for (let kill = 0; kill < flags.kills; kill++) {
    // Spread over the sending phase when it is still going, and into the processing tail otherwise.
    await sleep(streaming ? 1500 + random() * 3500 : 200 + random() * 1500);
    killTimes.push((performance.now() - startedAt) / 1000);
    await runtime.kill();
    const restartAt = performance.now();
    await runtime.start();
    restartSeconds.push((performance.now() - restartAt) / 1000);
  }
  const stream = await streamDone;
  sender.close();
  const fanStream = await fan.stream;
  const store = new ReceiptStore(runtime.options.persistDir);
  const waited = await waitUntilFinished(store, "crash_evt_", workload.events.length, {
    origin: () => runtime.origin,
    startedAt,
    stallMs: 180_000,
    cronLeadMs: flags.cronLeadMinutes * 60_000,
  });
  const fanWaited = await waitUntilFinished(store, fan.keyPrefix, fan.workload.events.length, {
    origin: () => runtime.origin,
    startedAt,
    stallMs: 180_000,
    cronLeadMs: flags.cronLeadMinutes * 60_000,
    deliveries: true,
  });
  const row = {
    ...receiverVerdict(store, workload, stream, "crash_evt_", "crash_acct_"),
    handler: "receiver, with kills",
  };
  const fanResult = fanOutVerdict("crash recovery", store, fan, fanStream, fanOut.backend);
  console.log(formatTable([row, fanResult.row]));
  console.log(formatRouteCounts(fanResult.routes));
  console.log(
    `fan-out source: every receipt and further delivery finished ${(fanWaited.elapsedMs / 1000).toFixed(1)} s after the first send; ` +
      `cron fired by the bench: ${fanWaited.cronTriggers}`,
  );
  console.log(
    `kills at ${killTimes.map((t) => `${t.toFixed(1)} s`).join(", ")}; restarts took ${restartSeconds.map((t) => t.toFixed(1)).join(", ")} s; ` +
      `sender saw ${stream.connectionErrors} refused/timed-out requests and ${stream.status5xx} 5xx, retried until acknowledged` +
      (stream.abandoned ? ` (${stream.abandoned} abandoned!)` : ""),
  );
  console.log(
    `after recovery: events lost ${row.lost}, applied twice ${row.duplicateEvents} (extra applies ${row.extraApplies}); ` +
      `finished ${(waited.elapsedMs / 1000).toFixed(1)} s after the first send; cron fired by the bench: ${waited.cronTriggers} ` +
      `(each as if ${flags.cronLeadMinutes} min later); ` +
      `receipts by status: ${[...waited.counts].map(([status, count]) => `${status} ${count}`).join(", ")}`,
  );
  assertCorrect("crash recovery", row);
  if (stream.abandoned > 0) failures.push(`crash recovery: the sender gave up on ${stream.abandoned} events`);
  results.crash = {
    row,
    kills: killTimes,
    restartSeconds,
    stream: { ...stream, arrivals: undefined },
    cronTriggers: waited.cronTriggers,
    fanOut: { ...fanResult, cronTriggers: fanWaited.cronTriggers, finishedSeconds: fanWaited.elapsedMs / 1000 },
  };
  await runtime.stop();
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

function assertCorrect(phase: string, row: VerdictRow): void {
  for (const problem of correctnessProblems(row)) failures.push(`${phase}: ${problem}`);
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
