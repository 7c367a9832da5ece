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
 * @example
 * const clock = attemptClock(now);
 * const results = await inAttemptSlots(deliveries, now, clock, (delivery, startedAt) => run(delivery, startedAt));
 */
export async function inAttemptSlots<T, R>(
  items: readonly T[],
  now: number,
  clock: () => number,
  attempt: (item: T, startedAt: number) => Promise<R>,
  limit = ATTEMPTS_IN_FLIGHT,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    for (let index = next++; index < items.length; index = next++)
      results[index] = await attempt(items[index]!, index >= limit ? clock() : now);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}
