import { PACED_SEND_MARGIN_MS } from "../../gate/decide";
import { ATTEMPTS_IN_FLIGHT } from "./slice-budget";

/**
 * How a slice's attempts share the consumer: at most ATTEMPTS_IN_FLIGHT at once (a Worker's outgoing connection
 * limit), each on its own start time. Every delivery goes through here, whichever row holds it (process.ts for the
 * receipt's own delivery and a fan-out's first attempts, deliveries.ts for a further delivery's later ones), so an
 * attempt that waited for a slot is never signed, leased or timed as if it had started with the slice.
 */

/**
 * The attempt clock: `now` (the slice's start, injectable by tests) when the attempts begin, running on in real time.
 * The first wave starts at `now` exactly; an attempt that waited for a free slot starts when it really does.
 */
export function attemptClock(now: number): () => number {
  const attemptsBegan = Date.now();
  return () => now + (Date.now() - attemptsBegan);
}

/**
 * Runs `attempt` over `items` in order, at most ATTEMPTS_IN_FLIGHT at once, each given its own start time on
 * `clock`: `now` for the first wave, the clock's reading when a slot freed for the rest.
 *
 * An item its rate-limited gate admitted for a later time (`pacing.startAt`, src/gate/decide.ts) first waits for that
 * time in its slot (wall time: the consumer is idle meanwhile, its lease already taken, so the send leaves as the wait
 * ends), read on `pacing.clock`, the slice's clock since it began: the gate's times are the slice's, and the slice's
 * own work before its attempts (loads, the gate, the leases) has taken real time too. It starts at its paced time.
 * One whose wait ended more than PACED_SEND_MARGIN_MS late (its slot freed too late, a busy machine) is handed over
 * with `tooLate`: the gate counted its send as gone by then, so sending it now could put one more in a window than
 * the limit allows; its caller does not start it, and it goes back on the queue.
 *
 * @example
 * const clock = attemptClock(now);
 * const results = await inAttemptSlots(deliveries, now, clock, (delivery, startedAt) => run(delivery, startedAt));
 */
export async function inAttemptSlots<T, R>(
  items: readonly T[],
  now: number,
  clock: () => number,
  attempt: (item: T, startedAt: number, tooLate: boolean) => Promise<R>,
  pacing: { startAt: (item: T) => number | undefined; clock: () => number } | null = null,
  limit = ATTEMPTS_IN_FLIGHT,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    for (let index = next++; index < items.length; index = next++) {
      const item = items[index]!;
      const at = pacing?.startAt(item);
      if (pacing === null || at === undefined) {
        results[index] = await attempt(item, index >= limit ? clock() : now, false);
        continue;
      }
      // One wait per item, at most the gate's reach (RATE_RESERVE_MS): bounded however the clock reads.
      const waitMs = at - pacing.clock();
      if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, waitMs));
      results[index] = await attempt(item, Math.max(at, clock()), pacing.clock() > at + PACED_SEND_MARGIN_MS);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}
