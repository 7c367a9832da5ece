import type { BenchFlags } from "./flags.ts";
import type { Runtime } from "./runtime.ts";
import { Sender } from "./sender.ts";
import type { ReceiverDeployment } from "./setup.ts";
import { ReceiptStore } from "./store.ts";
import { waitUntilFinished } from "./wait.ts";

/**
 * The performance phase's end-to-end run on the whole system: --e2e-events fresh events at the highest level,
 * timed from the first send until every one is processed, once what the levels accepted has been processed.
 */
export async function endToEnd(flags: BenchFlags, deployment: ReceiverDeployment, receiver: Runtime) {
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
  return e2e;
}
