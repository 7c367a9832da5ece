#!/usr/bin/env node
/**
 * `npm run bench`: the receiver on local workerd (wrangler dev, persisted state), driven over HTTP by a
 * simulated at-least-once sender whose every delivery is signed by the `standardwebhooks` library.
 * Phases: correctness simulation with a naive control, crash recovery under SIGKILL, side-by-side
 * performance against a bare Worker, and a cost model. `--check` runs the correctness phases only and exits 1
 * when any correctness number is wrong; it never asserts speed. Each phase lives in bench/lib/<phase>-phase.ts;
 * this entry parses the flags, runs the chosen phases in order and writes the results.
 */
import { mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { crashPhase } from "./lib/crash-phase.ts";
import { startFanOutRun } from "./lib/fan-out-run.ts";
import { type BenchFlags, FlagError, parseFlags } from "./lib/flags.ts";
import { heldWorkPhase } from "./lib/held-work-phase.ts";
import { latencyPhase } from "./lib/latency-phase.ts";
import { metersPhase } from "./lib/meters-phase.ts";
import { perfPhase } from "./lib/perf-phase.ts";
import { poisonPhase } from "./lib/poison-phase.ts";
import { writeResultsFile } from "./lib/results-file.ts";
import { type BenchSession, benchSession, printHeader, shutdown, startSharedReceiver } from "./lib/session.ts";
import { snapshotReceiver } from "./lib/setup.ts";
import { simPhase } from "./lib/sim-phase.ts";
import { soakPhase } from "./lib/soak-phase.ts";

/** Runs the chosen phases in their order, each result under its key in `results`. */
async function runPhases(flags: BenchFlags, session: BenchSession, results: Record<string, unknown>): Promise<void> {
  const stateDir = resolve(flags.stateDir);
  mkdirSync(stateDir, { recursive: true });
  printHeader(flags, stateDir);
  const deployment = snapshotReceiver(stateDir);
  // The simulation and the crash run also drive a source with several routes, two of them forwarding here.
  const fanOut =
    flags.phases.has("sim") || flags.phases.has("crash") ? await startFanOutRun(deployment, session.closers) : null;
  const receiver = await startSharedReceiver(flags, session, deployment, stateDir, fanOut);
  const { phases } = flags;
  if (phases.has("meters")) results.meters = await metersPhase(flags, deployment, stateDir, session);
  if (phases.has("sim")) Object.assign(results, await simPhase(flags, deployment, receiver!, fanOut!, session));
  if (phases.has("crash")) results.crash = await crashPhase(flags, deployment, stateDir, fanOut!, session);
  if (phases.has("poison")) results.poison = await poisonPhase(deployment, stateDir, session);
  if (phases.has("perf")) results.performance = await perfPhase(flags, deployment, receiver!, stateDir, session);
  if (phases.has("latency")) results.latency = await latencyPhase(flags, deployment, stateDir, session);
  if (phases.has("held")) results.held = await heldWorkPhase(flags, deployment, stateDir, session);
  if (phases.has("soak")) results.soak = await soakPhase(flags, deployment, stateDir, session);
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
const session = benchSession(flags);
for (const signal of ["SIGINT", "SIGTERM"] as const) {
  process.once(signal, () => {
    void shutdown(session, flags.keepState, flags.stateDir).finally(() => process.exit(130));
  });
}
const results: Record<string, unknown> = {};
let crashed: unknown = null;
try {
  await runPhases(flags, session, results);
} catch (error) {
  crashed = error;
}
await shutdown(session, flags.keepState || crashed !== null, flags.stateDir);
if (flags.jsonOut) writeResultsFile(flags.jsonOut, flags, results, session.failures);
if (crashed) {
  console.error(
    `\nbench failed: ${crashed instanceof Error ? crashed.stack : String(crashed)}\nstate kept in ${join(resolve(flags.stateDir))}`,
  );
  process.exit(1);
}
if (session.failures.length > 0) {
  console.error(`\nCORRECTNESS FAILURES:\n  ${session.failures.join("\n  ")}`);
  process.exit(1);
}
console.log(flags.check ? "\ncheck passed: every correctness number is right" : "\ndone");
