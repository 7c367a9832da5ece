import {
  FAN_OUT_SOURCE,
  fanOutSource,
  forwardRouteCounts,
  type RouteCount,
  routeProblems,
  routeTakes,
} from "./fan-out.ts";
import type { BenchFlags } from "./flags.ts";
import { startForwardBackend } from "./forward-backend.ts";
import { Sender } from "./sender.ts";
import { deploymentWithSource, type ReceiverDeployment } from "./setup.ts";
import type { ReceiptStore } from "./store.ts";
import { playSchedule } from "./stream.ts";
import { receiverVerdict, recordCorrectness, type VerdictRow } from "./verdict.ts";
import { makeWorkload, scheduleDeliveries, type Workload } from "./workload.ts";

/** The fan-out source of the simulation and the crash run: its deployment, and the backend its forwards reach. */
export interface FanOutRun {
  backend: Awaited<ReturnType<typeof startForwardBackend>>;
  deployment: ReceiverDeployment;
}

/** The forward backend (closed by `closers` at shutdown) and the deployment with the fan-out source forwarding to it. */
export async function startFanOutRun(
  deployment: ReceiverDeployment,
  closers: Array<() => Promise<void>>,
): Promise<FanOutRun> {
  const backend = await startForwardBackend();
  closers.push(backend.close);
  return {
    backend,
    deployment: deploymentWithSource(
      deployment,
      "fan-out",
      FAN_OUT_SOURCE,
      fanOutSource(backend.port, "account.credited"),
    ),
  };
}

/**
 * The fan-out source's share of a phase (--fan-out-share of its events, at least 20), played alongside the demo
 * source's stream with the same faults at a quarter of its concurrency: the routes' verdict comes from the same run.
 */
export function fanOutStream(
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
export function fanOutVerdict(
  phase: string,
  store: ReceiptStore,
  fan: { workload: Workload; keyPrefix: string; accountPrefix: string },
  stream: Awaited<ReturnType<typeof playSchedule>>,
  backend: FanOutRun["backend"],
  failures: string[],
): { row: VerdictRow; routes: RouteCount[] } {
  const row = {
    ...receiverVerdict(store, fan.workload, stream, fan.keyPrefix, fan.accountPrefix, FAN_OUT_SOURCE),
    handler: "fan-out: ledger route",
  };
  const routes = forwardRouteCounts(store, fan.workload, backend.seen(), fan.keyPrefix, routeTakes("account.credited"));
  recordCorrectness(failures, `${phase} (fan-out source, ledger route)`, row);
  for (const count of routes)
    for (const problem of routeProblems(count)) failures.push(`${phase} (fan-out source): ${problem}`);
  if (stream.abandoned > 0) failures.push(`${phase}: the sender gave up on ${stream.abandoned} fan-out events`);
  return { row, routes };
}
