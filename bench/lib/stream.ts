import { setTimeout as sleep } from "node:timers/promises";
import { keyedDraw } from "./random.ts";
import type { Sender } from "./sender.ts";
import { eventBody, type ScheduledDelivery } from "./workload.ts";

/**
 * Plays a delivery schedule against the receiver the way an at-least-once sender does: a bounded number of
 * deliveries in flight in schedule order, both copies of a concurrent pair started together, every
 * unacknowledged attempt (5xx, 4xx, refused connection, timeout) retried with backoff until acknowledged, and a
 * 2xx whose response is "lost after commit" (drawn per attempt from the seed) re-sent later in the stream.
 */

export interface StreamStats {
  deliveries: number;
  status5xx: number;
  connectionErrors: number;
  ackLostResends: number;
  /** Events whose sender gave up (attempt cap reached) without an acknowledgement. */
  abandoned: number;
  /** Every request that reached the receiver and got an answer, in the order it was sent: the naive control's input. */
  arrivals: number[];
  elapsedMs: number;
}

export interface StreamOptions {
  seed: number;
  ackLostChance: number;
  concurrency: number;
  maxAttemptsPerEvent?: number;
}

export async function playSchedule(
  sender: Sender,
  schedule: readonly ScheduledDelivery[],
  options: StreamOptions,
): Promise<StreamStats> {
  const pending = schedule.map((delivery) => ({ ...delivery }));
  const attemptsByEvent = new Map<number, number>();
  const maxAttempts = options.maxAttemptsPerEvent ?? 200;
  const stats: StreamStats = {
    deliveries: 0,
    status5xx: 0,
    connectionErrors: 0,
    ackLostResends: 0,
    abandoned: 0,
    arrivals: [],
    elapsedMs: 0,
  };
  const startedAt = performance.now();

  const insertByPosition = (delivery: ScheduledDelivery) => {
    let low = 0;
    let high = pending.length;
    while (low < high) {
      const middle = (low + high) >> 1;
      if (pending[middle]!.position <= delivery.position) low = middle + 1;
      else high = middle;
    }
    pending.splice(low, 0, delivery);
  };

  /** One request for one event; resolves to whether the sender counts it as acknowledged. */
  const attempt = async (delivery: ScheduledDelivery): Promise<"acked" | "failed"> => {
    const { event } = delivery;
    const attemptNumber = (attemptsByEvent.get(event.index) ?? 0) + 1;
    attemptsByEvent.set(event.index, attemptNumber);
    stats.deliveries++;
    const arrivalSlot = stats.arrivals.push(event.index) - 1;
    const outcome = await sender.deliver(event.eventKey, eventBody(event));
    if (outcome.status === "error") {
      stats.connectionErrors++;
      stats.arrivals[arrivalSlot] = -1; // never reached a handler
      return "failed";
    }
    if (outcome.status >= 500) stats.status5xx++;
    else if (outcome.status >= 400) {
      // A validly signed delivery refused with a 4xx means the bench and the receiver disagree (secret, config):
      // retrying cannot help, and counting it as a receiver fault would hide the cause.
      throw new Error(`receiver answered ${outcome.status} to ${event.eventKey}; check the runtime log`);
    }
    if (outcome.status < 200 || outcome.status >= 300) return "failed";
    if (keyedDraw(options.seed, event.eventKey, attemptNumber, "ackLost") < options.ackLostChance) {
      stats.ackLostResends++;
      insertByPosition({
        position: delivery.position + 5 + keyedDraw(options.seed, event.eventKey, attemptNumber, "retryAt") * 200,
        event,
        copies: 1,
        kind: "retry",
      });
    }
    return "acked";
  };

  const sendUntilAcked = async (delivery: ScheduledDelivery): Promise<void> => {
    for (let failures = 0; ; failures++) {
      if ((await attempt(delivery)) === "acked") return;
      if ((attemptsByEvent.get(delivery.event.index) ?? 0) >= maxAttempts) {
        stats.abandoned++;
        return;
      }
      const backoffMs = Math.min(2000, 100 * 2 ** failures);
      await sleep(backoffMs / 2 + Math.random() * (backoffMs / 2));
    }
  };

  const worker = async () => {
    for (let next = pending.shift(); next; next = pending.shift()) {
      const delivery = next;
      await Promise.all(Array.from({ length: delivery.copies }, () => sendUntilAcked(delivery)));
    }
  };
  // A worker may finish while another still schedules an ack-lost resend; loop until nothing is left.
  while (pending.length > 0) await Promise.all(Array.from({ length: options.concurrency }, worker));
  stats.elapsedMs = performance.now() - startedAt;
  stats.arrivals = stats.arrivals.filter((eventIndex) => eventIndex >= 0);
  return stats;
}
