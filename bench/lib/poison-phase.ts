import type { PhaseContext } from "./happy-path.ts";
import { type PoisonResult, poisonCheck } from "./poison.ts";
import type { ReceiverDeployment } from "./setup.ts";

/** A poison event under real SIGKILLs (bench/lib/poison.ts): dead alone, its crashes counted, its batch-mates applied once. */
export async function poisonPhase(
  deployment: ReceiverDeployment,
  stateDir: string,
  context: PhaseContext,
): Promise<PoisonResult> {
  console.log(
    "\n== 2b. poison event: one event whose attempt never returns, sent with 9 batch-mates; the runtime is SIGKILLed mid-attempt until it is dead",
  );
  const startedAt = performance.now();
  const result = await poisonCheck(
    deployment,
    stateDir,
    { port: await context.portAt(6), inspectorPort: await context.portAt(16) },
    (runtime) => context.runtimes.push(runtime),
  );
  console.log(
    `${result.kills} kills; poison ${result.poison.status} after ${result.poison.attempts} counted attempts ` +
      `(${result.poison.history.map(({ number, outcome }) => `${number}:${outcome}`).join(", ")}); batch-mates: ${result.mates.processed} of ${result.mates.sent} processed, ` +
      `${result.mates.appliedOnce} applied once, ${result.mates.appliedTwice} more than once; cron fired ${result.cronRuns} times; ${((performance.now() - startedAt) / 1000).toFixed(1)} s`,
  );
  context.failures.push(...result.failures);
  return result;
}
