import type { CpuSeconds } from "./runtime.ts";
import { Sender } from "./sender.ts";

export interface LevelResult {
  target: string;
  concurrency: number;
  requests: number;
  non2xx: number;
  requestsPerSecond: number;
  p50: number;
  p95: number;
  p99: number;
  /** Requests answered from the start of the warm-up to the end of the measurement: what the CPU figure covers. */
  handled: number;
  /** The runtime's CPU ms per request handled, warm-up included (null when the caller gave no CPU reading). */
  cpuMsPerEvent: CpuMs | null;
}

export interface CpuMs {
  workerd: number;
  wrangler: number;
}

/** CPU ms per event between two readings of the runtime's processes. */
export function cpuMsPer(before: CpuSeconds, after: CpuSeconds, events: number): CpuMs {
  return {
    workerd: ((after.workerd - before.workerd) * 1000) / events,
    wrangler: ((after.wrangler - before.wrangler) * 1000) / events,
  };
}

/**
 * Closed-loop load: `concurrency` connections each send the next request as soon as the previous answer ends,
 * for a warm-up and then `seconds` of measurement. Every request is a new, validly signed event, so the receiver
 * does its full acknowledgement path (verify, claim, durable write) every time; signing happens before the
 * clock starts for each request.
 */
export async function measureLevel(options: {
  target: string;
  origin: string;
  path: string;
  secret: string;
  concurrency: number;
  seconds: number;
  keyPrefix: string;
  accountPrefix: string;
  /** The target runtime's CPU so far: read before the warm-up and after the measurement. */
  cpu?: () => CpuSeconds;
}): Promise<LevelResult> {
  const cpuBefore = options.cpu?.();
  const sender = new Sender({
    origin: options.origin,
    path: options.path,
    secret: options.secret,
    maxSockets: options.concurrency,
  });
  let sequence = 0;
  const body = (n: number) =>
    JSON.stringify({
      type: "account.credited",
      data: { account: `${options.accountPrefix}${String(n % 500).padStart(4, "0")}`, amount: 100 },
    });
  const run = async (millis: number, record: boolean) => {
    const latencies: number[] = [];
    let non2xx = 0;
    const endAt = performance.now() + millis;
    const startedAt = performance.now();
    await Promise.all(
      Array.from({ length: options.concurrency }, async () => {
        while (performance.now() < endAt) {
          const n = sequence++;
          const payload = body(n);
          const outcome = await sender.post(payload, sender.signedHeaders(`${options.keyPrefix}${n}`, payload));
          if (!record) continue;
          latencies.push(outcome.millis);
          if (outcome.status === "error" || outcome.status < 200 || outcome.status >= 300) non2xx++;
        }
      }),
    );
    return { latencies, non2xx, elapsedMs: performance.now() - startedAt };
  };
  await run(1000, false);
  const { latencies, non2xx, elapsedMs } = await run(options.seconds * 1000, true);
  const cpuAfter = options.cpu?.();
  sender.close();
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN;
  return {
    target: options.target,
    concurrency: options.concurrency,
    requests: latencies.length,
    non2xx,
    requestsPerSecond: latencies.length / (elapsedMs / 1000),
    p50: at(0.5),
    p95: at(0.95),
    p99: at(0.99),
    handled: sequence,
    cpuMsPerEvent: cpuBefore && cpuAfter ? cpuMsPer(cpuBefore, cpuAfter, sequence) : null,
  };
}
