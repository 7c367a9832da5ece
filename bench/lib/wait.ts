import { setTimeout as sleep } from "node:timers/promises";
import { deliveryStatusCounts, finishedCount, type ReceiptStore } from "./store.ts";

export interface WaitResult {
  finished: number;
  elapsedMs: number;
  /** Times the bench fired the receiver's cron because processing had stalled (Cloudflare fires it every 5 min). */
  cronTriggers: number;
  counts: Map<string, number>;
}

/**
 * Polls D1 until every event of this run has a finished receipt, or until nothing has moved for `stallMs`.
 * Locally nothing fires the cron trigger, so when progress stops for `cronAfterMs` the bench fires it the way
 * Cloudflare would; the count is reported, never hidden.
 */
export async function waitUntilFinished(
  store: ReceiptStore,
  keyPrefix: string,
  expected: number,
  options: {
    origin: () => string;
    stallMs?: number;
    cronAfterMs?: number;
    /**
     * Fire the cron as if it ran this much later than now. After a crash, a receipt leased by a consumer that
     * died is re-driven once its lease has expired, and a pending one whose queue message died with the runtime
     * once it is overdue; the cron judges both by its scheduled time. A lead lets the bench stand in for "the
     * cron, a few runs later" instead of waiting out the real lease and grace.
     */
    cronLeadMs?: number;
    startedAt?: number;
    /** Also wait for the further routes' deliveries of these receipts (a source with several routes). */
    deliveries?: boolean;
  },
): Promise<WaitResult> {
  const startedAt = options.startedAt ?? performance.now();
  const stallMs = options.stallMs ?? 120_000;
  const cronAfterMs = options.cronAfterMs ?? 10_000;
  let lastProgressAt = performance.now();
  let lastCronAt = 0;
  let last = -1;
  let cronTriggers = 0;
  for (;;) {
    let counts = new Map<string, number>();
    let deliveries = new Map<string, number>();
    try {
      counts = store.statusCounts(keyPrefix);
      if (options.deliveries) deliveries = deliveryStatusCounts(store, keyPrefix);
    } catch {
      // the database may be mid-checkpoint or not created yet; try again
    }
    const finished = finishedCount(counts);
    const deliveriesFinished = finishedCount(deliveries);
    const deliveriesUnfinished = [...deliveries.values()].reduce((sum, count) => sum + count, 0) - deliveriesFinished;
    const progress = finished + deliveriesFinished;
    const now = performance.now();
    if (progress !== last) {
      last = progress;
      lastProgressAt = now;
    }
    if ((finished >= expected && deliveriesUnfinished === 0) || now - lastProgressAt > stallMs) {
      return { finished, elapsedMs: now - startedAt, cronTriggers, counts };
    }
    if (now - lastProgressAt > cronAfterMs && now - lastCronAt > cronAfterMs) {
      lastCronAt = now;
      cronTriggers++;
      try {
        const response = await fetch(
          `${options.origin()}/cdn-cgi/local/scheduled?cron=*/5+*+*+*+*&time=${Date.now() + (options.cronLeadMs ?? 0)}`,
          { signal: AbortSignal.timeout(60_000) },
        );
        await response.arrayBuffer();
      } catch {
        // the runtime may be restarting
      }
    }
    await sleep(250);
  }
}
