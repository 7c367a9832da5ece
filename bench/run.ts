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
import { perfPhase } from "./lib/perf-phase.ts";
import { logPlanWrites } from "./lib/plan-writes.ts";
import { poisonPhase } from "./lib/poison-phase.ts";
import { freePort, type Runtime } from "./lib/runtime.ts";
import { receiverRuntime, snapshotReceiver } from "./lib/setup.ts";
import { simPhase } from "./lib/sim-phase.ts";
import type { SoakResult } from "./lib/soak.ts";
import { soakPhase } from "./lib/soak-phase.ts";
import { ReceiptStore } from "./lib/store.ts";

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
  if (flags.phases.has("perf")) results.performance = await perfPhase(flags, deployment, receiver!, stateDir, context);
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
