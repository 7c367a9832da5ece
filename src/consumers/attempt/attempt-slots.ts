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
 * a paced one waits for its time, so a rate limit's waits leave the slots to the other slice's sends. An attempt that
 * opens several connections at once (an event's first attempt, fanned out to every route it matched) takes as many
 * slots, all before it starts: it never holds some while it waits for more, so two of them cannot wait on each other.
 *
 * @example
 * const connections = new ConnectionSlots();
 * await Promise.all([processBatch(env, ids, now, endsBy, { connections }), processDeliveries(env, route, more, now, endsBy, { connections })]);
 */
export class ConnectionSlots {
  private free: number;
  /** Attempts waiting for slots, first come first served: a wide one at the head is not overtaken by narrow ones. */
  private readonly waiting: Array<{ slots: number; resolve: () => void }> = [];

  constructor(readonly limit = ATTEMPTS_IN_FLIGHT) {
    this.free = limit;
  }

  /** The slots an attempt opening `connections` at once holds: all of them, up to the whole budget. */
  slotsFor(connections: number): number {
    return Math.max(1, Math.min(this.limit, connections));
  }

  /**
   * Resolves once `slots` are held, all at once: `true` when it had to wait for them (the attempt starts later than
   * its slice).
   */
  async take(slots = 1): Promise<boolean> {
    if (this.waiting.length === 0 && this.free >= slots) {
      this.free -= slots;
      return false;
    }
    await new Promise<void>((resolve) => this.waiting.push({ slots, resolve }));
    return true;
  }

  /** Gives back `slots`, handing them on to the attempts waiting longest while there are enough for each. */
  give(slots = 1): void {
    this.free += slots;
    while (this.waiting.length > 0 && this.waiting[0]!.slots <= this.free) {
      const next = this.waiting.shift()!;
      this.free -= next.slots;
      next.resolve();
    }
  }

  /** Runs `run` holding `slots` (slotsFor: one per connection it opens); `waited` says whether it waited for them. */
  async holding<R>(run: (waited: boolean) => Promise<R>, slots = 1): Promise<R> {
    const waited = await this.take(slots);
    try {
      return await run(waited);
    } finally {
      this.give(slots);
    }
  }
}

/**
 * Runs `attempt` over `items` in order, at most ATTEMPTS_IN_FLIGHT at once (the invocation's `connections`, shared
 * with whatever else it runs alongside; a slice's own when not given), each given its own start time on `clock`:
 * `now` for the first wave, the clock's reading when a slot freed for the rest. An item that opens several
 * connections at once (`connectionsOf`) holds a slot for each (up to all of them) while it runs.
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
  connectionsOf: (item: T) => number = () => 1,
): Promise<R[]> {
  const results = new Array<R>(items.length);
  const limit = connections.limit;
  let next = 0;
  const worker = async () => {
    for (let index = next++; index < items.length; index = next++) {
      const item = items[index]!;
      const at = pacing?.startAt(item);
      const slots = connections.slotsFor(connectionsOf(item));
      if (pacing === null || at === undefined) {
        results[index] = await connections.holding(
          (waited) => attempt(item, index >= limit || waited ? clock() : now, false),
          slots,
        );
        continue;
      }
      // One wait per item, at most the gate's reach (RATE_RESERVE_MS): bounded however the clock reads.
      const waitMs = at - pacing.clock();
      if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, waitMs));
      results[index] = await connections.holding(
        () => attempt(item, Math.max(at, clock()), pacing.clock() > at + PACED_SEND_MARGIN_MS),
        slots,
      );
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}
