/**
 * When a claim that finds no relay armed has its shard's relay alarm go off: the adaptive relay (issue 37 §4).
 *
 * A shard that has not relayed within the gathering window is idle, and its claim is relayed at once: a lone event
 * is processed about as fast as the queue delivers it, instead of waiting out a window it shares with nobody. A
 * shard that relayed within the window is busy: the claim gathers until the window since that relay's end has
 * passed, as do the claims that arrive while a relay runs (the alarm re-arms a full window for them). Relays thus
 * stay at most one per window per shard under load, each batch as large as before, and the D1 calls, alarm writes
 * and queue operations per event at a steady rate do not rise; a burst pays one extra relay, its first claim's.
 *
 * Times are the alarm's schedule, never a bound on work (DESIGN invariant 10): the shard reads Date.now() only to
 * say when its alarm is due.
 */
export interface RelayTimingInput {
  /** Date.now() as the claim arms the relay. */
  now: number;
  /** When this instance's last relay finished, or null if it has relayed none (a fresh instance is idle). */
  lastRelayEndedAt: number | null;
  /** The gathering window: RELAY_DELAY_MS (./relay-settings.ts). */
  gatherMs: number;
  /** The bench's held-back receiver: every claim waits the whole window, idle or not. */
  fullBatchWaits: boolean;
}

/** How long from now the relay alarm is set for a claim that finds none armed, between 0 and the window. */
export function relayDelayForClaim({ now, lastRelayEndedAt, gatherMs, fullBatchWaits }: RelayTimingInput): number {
  if (fullBatchWaits) return gatherMs;
  if (lastRelayEndedAt === null) return 0;
  return Math.min(gatherMs, Math.max(0, lastRelayEndedAt + gatherMs - now));
}
