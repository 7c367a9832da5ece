import { faultableDeployment } from "./faults.ts";
import type { BenchFlags } from "./flags.ts";
import { startForwardBackend } from "./forward-backend.ts";
import type { PhaseContext } from "./happy-path.ts";
import { Sender } from "./sender.ts";
import { type ReceiverDeployment, receiverRuntime } from "./setup.ts";
import {
  formatSamples,
  forwardedKey,
  runSoak,
  SOAK_FORWARD_SOURCE,
  SOAK_SOURCE,
  type SoakResult,
  soakDeployment,
} from "./soak.ts";
import { formatLostForward } from "./soak-lost.ts";
import { ReceiptStore } from "./store.ts";

/** How long a kill or restart fault waits for the runtime to answer again before the run fails. */
const FAULT_RESTART_TIMEOUT_MS = 300_000;

/**
 * A fixed arrival rate for --minutes on a runtime of its own, with the soak source's retention scaled down and
 * the cron fired every --cron-seconds: sizes must go flat once the retention window has passed, and nothing is lost.
 * With --faults (bench/lib/faults.ts) a share of the arrivals is forwarded to a backend of the bench's, the faults
 * play while the rate keeps arriving, and each must keep acks answering where the design says and drain fast after.
 */
export async function soakPhase(
  flags: BenchFlags,
  deployment: ReceiverDeployment,
  stateDir: string,
  context: PhaseContext,
): Promise<SoakResult> {
  const settings = flags.soak;
  const faulted = settings.faults.length > 0;
  const backend = faulted ? await startForwardBackend(forwardedKey) : null;
  const runtime = receiverRuntime(
    soakDeployment(faulted ? faultableDeployment(deployment, stateDir) : deployment, settings, backend?.port ?? null),
    stateDir,
    "soak",
    await context.portAt(4),
    await context.portAt(14),
  );
  context.runtimes.push(runtime);
  await runtime.start();
  console.log(
    `\n== 5. soak: ${settings.rate} events/s for ${settings.minutes} min to /webhooks/${SOAK_SOURCE} (payload retention ${settings.payloadRetention}, ` +
      `dedupe retention ${settings.dedupeRetention}), cron every ${settings.cronSeconds} s, a sample every 30 s` +
      (faulted
        ? `; faults ${settings.faults.map((fault) => `${fault.kind}@${fault.atS}s+${fault.forS}s`).join(", ")}, one arrival in 5 to /webhooks/${SOAK_FORWARD_SOURCE} (forwarded to the bench's backend; bodies in R2 segments, receipts in a ring of 4 partitions)`
        : ""),
  );
  const senderTo = (source: string) =>
    new Sender({ origin: runtime.origin, path: `/webhooks/${source}`, secret: deployment.demoSecret, maxSockets: 64 });
  const senders = { soak: senderTo(SOAK_SOURCE), forward: faulted ? senderTo(SOAK_FORWARD_SOURCE) : null };
  const store = new ReceiptStore(runtime.options.persistDir);
  let printed = 0;
  const result: SoakResult = await runSoak(
    () => runtime.origin,
    runtime.options.persistDir,
    senders,
    store,
    settings,
    (sample) => {
      const lines = formatSamples([sample]).split("\n");
      console.log((printed++ === 0 ? lines : lines.slice(2)).join("\n"));
    },
    backend
      ? {
          targets: {
            origin: () => runtime.origin,
            kill: () => runtime.kill(),
            stop: () => runtime.stop(),
            // A restart under load (wrangler dev bundling again at load 15-20) can take well over the default 90 s.
            start: () => runtime.start(FAULT_RESTART_TIMEOUT_MS),
            destinationDown: (down) => backend.setDown(down),
          },
          forwardedPerKey: () => backend.answeredPerKey(),
          heardOf: (eventKey) => backend.heardOf(eventKey),
          log: (line) => console.log(line),
        }
      : null,
  );
  senders.soak.close();
  senders.forward?.close();
  await backend?.close();
  console.log(
    `acknowledged ${result.acknowledged} events (${result.resends} resends, ${result.lateStarts} sent over a second late), ` +
      `credited ${result.credited}: lost ${result.lost}, applied twice ${result.duplicated}, unfinished ${result.unfinished}, dead ${result.dead}; ` +
      `${result.cronRuns} cron runs; steady: ${result.steady ?? "not judged (too few samples outside the faults)"}`,
  );
  const { failures } = context;
  if (result.lost > 0 || result.duplicated > 0)
    failures.push(`soak: ${result.lost} events lost, ${result.duplicated} applied twice`);
  if (result.unfinished > 0 || result.dead > 0)
    failures.push(
      `soak: ${result.unfinished} events still unfinished after the drain, ${result.dead} dead: not applied, so not proven unlost`,
    );
  if (result.steady === false)
    failures.push("soak: no steady state (sizes still growing after the retention window, or a growing backlog)");
  if (faulted) reportFaults(result, backend!.refused(), failures);
  return result;
}

function reportFaults(result: SoakResult, refusedForwards: number, failures: string[]): void {
  const { forwarded } = result;
  console.log(
    `forwarded: ${forwarded.acknowledged} acknowledged, ${forwarded.delivered} answered 200 by the backend, lost ${forwarded.lost}, ` +
      `sent again after a 200 ${forwarded.repeated}; ${refusedForwards} forwards answered 503 while it was down; ` +
      `deliveries not acknowledged outside the faults: ${result.ackFailuresOutsideFaults}`,
  );
  if (result.undeliveredForwards.length > 0)
    console.log(
      `acknowledged forwards never answered 200 (${forwarded.acknowledged - forwarded.delivered}, the first ${result.undeliveredForwards.length} described):`,
    );
  for (const undelivered of result.undeliveredForwards) console.log(formatLostForward(undelivered));
  console.log(
    "| fault | started (s) | lasted (s) | ack failures | backlog before | backlog peak | drained after (s) | drain ÷ arrival rate |",
  );
  console.log("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
  for (const fault of result.faults) {
    console.log(
      `| ${fault.kind} | ${fault.startedAt} | ${fault.durationS} | ${fault.ackFailures} | ${fault.backlogBefore} | ${fault.backlogPeak} | ` +
        `${fault.drainedAfterS ?? "not drained"} | ${fault.drainSpeedup === null ? (fault.drainedAfterS === null ? "—" : "within 1 s") : `${fault.drainSpeedup}×`} |`,
    );
    failures.push(...fault.problems.map((problem) => `soak faults: ${problem}`));
  }
  if ((result.ackFailuresOutsideFaults ?? 0) > 0)
    failures.push(`soak faults: ${result.ackFailuresOutsideFaults} deliveries not acknowledged outside every fault`);
}
