import { rmSync } from "node:fs";
import os from "node:os";
import { resolve } from "node:path";
import type { FanOutRun } from "./fan-out-run.ts";
import type { BenchFlags } from "./flags.ts";
import type { PhaseContext } from "./happy-path.ts";
import { logPlanWrites } from "./plan-writes.ts";
import { freePort, type Runtime } from "./runtime.ts";
import { type ReceiverDeployment, receiverRuntime } from "./setup.ts";
import { ReceiptStore } from "./store.ts";

/** What a run shares with its phases, and the local servers (the forward backends) it closes at shutdown. */
export interface BenchSession extends PhaseContext {
  closers: Array<() => Promise<void>>;
}

export function benchSession(flags: BenchFlags): BenchSession {
  return {
    failures: [],
    runtimes: [],
    closers: [],
    // The port at `offset` from the base, or a free one when no base is fixed.
    portAt: async (offset) => (flags.portBase === null ? freePort() : flags.portBase + offset),
  };
}

export function printHeader(flags: BenchFlags, stateDir: string): void {
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
 * The receiver the simulation and the performance phase share, started on the ports at offsets 0 and 10 (with the
 * fan-out source when the simulation drives it); null when neither phase runs.
 */
export async function startSharedReceiver(
  flags: BenchFlags,
  session: BenchSession,
  deployment: ReceiverDeployment,
  stateDir: string,
  fanOut: FanOutRun | null,
): Promise<Runtime | null> {
  if (!flags.phases.has("sim") && !flags.phases.has("perf")) return null;
  const receiver = receiverRuntime(
    fanOut?.deployment ?? deployment,
    stateDir,
    "receiver",
    await session.portAt(0),
    await session.portAt(10),
  );
  session.runtimes.push(receiver);
  if (flags.phases.has("sim")) logPlanWrites(new ReceiptStore(receiver.options.persistDir));
  await receiver.start();
  return receiver;
}

/** Stops every runtime and closes every server the phases started; the state goes unless it is kept. */
export async function shutdown(session: BenchSession, keepState: boolean, stateDir: string): Promise<void> {
  await Promise.all(session.runtimes.map((runtime) => runtime.stop().catch(() => undefined)));
  await Promise.all(session.closers.map((close) => close().catch(() => undefined)));
  if (!keepState) rmSync(resolve(stateDir), { recursive: true, force: true });
}
