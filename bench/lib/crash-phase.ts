import { setTimeout as sleep } from "node:timers/promises";
import { FAN_OUT_SOURCE, formatRouteCounts } from "./fan-out.ts";
import { type FanOutRun, fanOutStream, fanOutVerdict } from "./fan-out-run.ts";
import type { BenchFlags } from "./flags.ts";
import type { PhaseContext } from "./happy-path.ts";
import { logPlanWrites } from "./plan-writes.ts";
import { mulberry32 } from "./random.ts";
import { Sender } from "./sender.ts";
import { type ReceiverDeployment, receiverRuntime } from "./setup.ts";
import { ReceiptStore } from "./store.ts";
import { playSchedule } from "./stream.ts";
import { formatTable, receiverVerdict, recordCorrectness } from "./verdict.ts";
import { waitUntilFinished } from "./wait.ts";
import { makeWorkload, scheduleDeliveries } from "./workload.ts";

/**
 * Crash recovery on a runtime of its own: --crash-events to the demo source and a share to the fan-out source,
 * with --kills SIGKILLs of the runtime (wrangler + workerd) at seeded moments, each restarted at once; after the
 * kills the cron fires as if --cron-lead-minutes later, and every event must be applied exactly once.
 */
export async function crashPhase(
  flags: BenchFlags,
  deployment: ReceiverDeployment,
  stateDir: string,
  fanOut: FanOutRun,
  context: PhaseContext,
) {
  const { failures } = context;
  const runtime = receiverRuntime(
    fanOut.deployment,
    stateDir,
    "crash",
    await context.portAt(2),
    await context.portAt(12),
  );
  context.runtimes.push(runtime);
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
  const fanResult = fanOutVerdict("crash recovery", store, fan, fanStream, fanOut.backend, failures);
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
  recordCorrectness(failures, "crash recovery", row);
  if (stream.abandoned > 0) failures.push(`crash recovery: the sender gave up on ${stream.abandoned} events`);
  const result = {
    row,
    kills: killTimes,
    restartSeconds,
    stream: { ...stream, arrivals: undefined },
    cronTriggers: waited.cronTriggers,
    fanOut: { ...fanResult, cronTriggers: fanWaited.cronTriggers, finishedSeconds: fanWaited.elapsedMs / 1000 },
  };
  await runtime.stop();
  return result;
}
