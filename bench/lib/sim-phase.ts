import { costModel, formatCost, type RunCounts } from "./cost.ts";
import { FAN_OUT_SOURCE, formatRouteCounts } from "./fan-out.ts";
import { type FanOutRun, fanOutStream, fanOutVerdict } from "./fan-out-run.ts";
import type { BenchFlags } from "./flags.ts";
import type { PhaseContext } from "./happy-path.ts";
import type { Runtime } from "./runtime.ts";
import { Sender } from "./sender.ts";
import type { ReceiverDeployment } from "./setup.ts";
import { ReceiptStore } from "./store.ts";
import { playSchedule } from "./stream.ts";
import { formatTable, naiveVerdict, receiverVerdict, recordCorrectness } from "./verdict.ts";
import { waitUntilFinished } from "./wait.ts";
import { makeWorkload, scheduleDeliveries } from "./workload.ts";

/**
 * The correctness simulation on the shared receiver: --events to the demo source under the seeded faults, beside
 * a naive control that shows the faults happened, and a share to the fan-out source; then the cost model's
 * cross-check from the run's counts. Returns the run's `simulation` and `cost` results.
 */
export async function simPhase(
  flags: BenchFlags,
  deployment: ReceiverDeployment,
  receiver: Runtime,
  fanOut: FanOutRun,
  context: PhaseContext,
) {
  const { failures } = context;
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
  const fanResult = fanOutVerdict("simulation", store, fan, fanStream, fanOut.backend, failures);
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
  recordCorrectness(failures, "simulation", rows[0]!);
  const control = rows[1]!;
  const faultsOn = flags.duplicateChance + flags.concurrentChance + flags.ackLostChance > 0;
  if (faultsOn && flags.events >= 300 && control.duplicateEvents === 0) {
    failures.push("simulation: the naive control shows no fault, so the fault injection is not working");
  }
  const simulation = {
    rows,
    stream: { ...stream, arrivals: undefined },
    wait: { ...waited, counts: Object.fromEntries(waited.counts) },
    fanOut: { ...fanResult, finishedSeconds: fanWaited.elapsedMs / 1000 },
  };
  return { simulation, cost: costCrossCheck(store, workload.events.length, stream.deliveries) };
}

/** The cost model from the statements and the simulation's own counts: a cross-check, the meters phase measures. */
function costCrossCheck(store: ReceiptStore, accepted: number, httpDeliveries: number) {
  const counts: RunCounts = store.read((database) => ({
    accepted,
    httpDeliveries,
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
  return cost;
}
