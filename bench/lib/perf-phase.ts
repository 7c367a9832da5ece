import { endToEnd } from "./end-to-end.ts";
import type { BenchFlags } from "./flags.ts";
import type { PhaseContext } from "./happy-path.ts";
import { type CpuMs, cpuMsPer, type LevelResult, measureLevel } from "./perf.ts";
import type { Runtime } from "./runtime.ts";
import {
  bareRuntime,
  FLOOR_RPC_PATH,
  FLOOR_WRITE_PATH,
  heldBackDeployment,
  type ReceiverDeployment,
  receiverRuntime,
} from "./setup.ts";
import { ReceiptStore } from "./store.ts";
import { waitUntilFinished } from "./wait.ts";

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

/**
 * Side by side at each --perf-levels concurrency for --perf-seconds: (a) a bare Worker, (b) the receiver (the whole
 * system, the shared runtime), (c) the same receiver with its relay held back (the ack path alone), (d) and (e) the
 * floor of one Durable Object call; then the end-to-end run (end-to-end.ts) and the runtimes' peak memory.
 */
export async function perfPhase(
  flags: BenchFlags,
  deployment: ReceiverDeployment,
  receiver: Runtime,
  stateDir: string,
  context: PhaseContext,
) {
  const bare = bareRuntime(stateDir, await context.portAt(1), await context.portAt(11));
  const heldBack = receiverRuntime(
    heldBackDeployment(deployment, stateDir),
    stateDir,
    "held-back",
    await context.portAt(3),
    await context.portAt(13),
  );
  context.runtimes.push(bare, heldBack);
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
    context.failures.push(
      `perf: the ack-path-alone runtime relayed ${ackOnlyRelayed} claims, so (c) is not the ack path alone`,
    );
  await heldBack.stop();

  const e2e = await endToEnd(flags, deployment, receiver);
  const memory = { receiverPeakRssMiB: receiver.peakRssMiB(), bareWorkerPeakRssMiB: bare.peakRssMiB() };
  console.log(
    `peak RSS (VmHWM of the largest workerd process): receiver ${memory.receiverPeakRssMiB.toFixed(0)} MiB, bare Worker ${memory.bareWorkerPeakRssMiB.toFixed(0)} MiB`,
  );
  return { levels, e2e, memory, ackOnlyRelayed };
}
