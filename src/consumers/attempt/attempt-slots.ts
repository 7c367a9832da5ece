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
 * The outgoing connections one consumer invocation may hold at once (ATTEMPTS_IN_FLIGHT), shared by every slice it
 * runs side by side: a batch's receipts and its further-delivery messages run alongside each other (queue.ts), and
 * each slice's own cap of six would let the two hold twelve. An attempt holds a slot only while it runs, never while
 * a paced one waits for its time, so a rate limit's waits leave the slots to the other slice's sends.
 *
 * @example
 * const connections = new ConnectionSlots();
 * await Promise.all([processBatch(env, ids, now, endsBy, { connections }), processDeliveries(env, route, more, now, endsBy, { connections })]);
 */
export class ConnectionSlots {
  private free: number;
  private readonly waiting: Array<() => void> = [];

  constructor(readonly limit = ATTEMPTS_IN_FLIGHT) {
    this.free = limit;
  }

  /** Resolves once a slot is held: `true` when it had to wait for one (the attempt starts later than its slice). */
  async take(): Promise<boolean> {
    if (this.free > 0) {
      this.free--;
      return false;
    }
    await new Promise<void>((resolve) => this.waiting.push(resolve));
    return true;
  }

  /** Hands the slot to the longest waiting attempt, or frees it. */
  give(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.free++;
  }

  /** Runs `run` holding a slot; `waited` says whether it had to wait for it. */
  async holding<R>(run: (waited: boolean) => Promise<R>): Promise<R> {
    const waited = await this.take();
    try {
      return await run(waited);
    } finally {
      this.give();
    }
  }
}

/**
 * Runs `attempt` over `items` in order, at most ATTEMPTS_IN_FLIGHT at once (the invocation's `connections`, shared
 * with whatever else it runs alongside; a slice's own when not given), each given its own start time on `clock`:
 * `now` for the first wave, the clock's reading when a slot freed for the rest.
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
  connections: ConnectionSlots = new ConnectionSlots(),
): Promise<R[]> {
  const results = new Array<R>(items.length);
  const limit = connections.limit;
  let next = 0;
  const worker = async () => {
    for (let index = next++; index < items.length; index = next++) {
      const item = items[index]!;
      const at = pacing?.startAt(item);
      if (pacing === null || at === undefined) {
        results[index] = await connections.holding((waited) =>
          attempt(item, index >= limit || waited ? clock() : now, false),
        );
        continue;
      }
      // One wait per item, at most the gate's reach (RATE_RESERVE_MS): bounded however the clock reads.
      const waitMs = at - pacing.clock();
      if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, waitMs));
      results[index] = await connections.holding(() =>
        attempt(item, Math.max(at, clock()), pacing.clock() > at + PACED_SEND_MARGIN_MS),
      );
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}
