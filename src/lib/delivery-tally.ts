/**
 * Which acknowledged deliveries share one Analytics Engine point, decided as a pure function of the tally so far,
 * the new delivery and the clock (src/lib/analytics.ts keeps the tallies and writes the points).
 *
 * A delivery answered 200 (accepted, duplicate, quarantined) is counted into its isolate's tally for its source and
 * disposition instead of writing a point of its own. The tally becomes one point when it holds `size` deliveries,
 * or when a delivery arrives `windowMs` or more after the tally's first one (so a quiet source still gets a point
 * a minute, not one per 25 deliveries whenever they come). The point's count is the number of deliveries it
 * stands for, its latency the last one's — a sample, one delivery in up to `size`, which is what the percentile
 * queries weigh — and its maximum the slowest of them, so the maximum stays exact.
 *
 * Why a sample and not every latency: a point holds at most 20 doubles, and the SQL API's weighted quantiles take
 * one value per point. Sampling one in 25 is what Analytics Engine itself does to a busy index at write time.
 */

export interface DeliveryTally {
  /** Deliveries counted so far. */
  count: number;
  /** The slowest of them, in ms. */
  maxMs: number;
  /** When the first of them was answered (ms since the epoch). */
  openedAt: number;
}

export interface TalliedPoint {
  /** How many deliveries the point stands for. */
  count: number;
  /** The latency of the delivery that closed the tally: the sample the percentiles are read from. */
  sampleMs: number;
  maxMs: number;
}

/** 25 deliveries a point: the point count per event falls to 1/25 on a busy source. */
export const TALLY_SIZE = 25;
/** A quiet source still writes a point at least once a minute (while it has deliveries). */
export const TALLY_WINDOW_MS = 60_000;

/**
 * @example
 *   const { tally, point } = tallyDelivery(undefined, 12, Date.now());   // tally {count 1}, no point yet
 */
export function tallyDelivery(
  tally: DeliveryTally | undefined,
  ackMs: number,
  now: number,
  size = TALLY_SIZE,
  windowMs = TALLY_WINDOW_MS,
): { tally: DeliveryTally | undefined; point: TalliedPoint | null } {
  const counted: DeliveryTally = tally
    ? { count: tally.count + 1, maxMs: Math.max(tally.maxMs, ackMs), openedAt: tally.openedAt }
    : { count: 1, maxMs: ackMs, openedAt: now };
  if (counted.count < size && now - counted.openedAt < windowMs) return { tally: counted, point: null };
  return { tally: undefined, point: { count: counted.count, sampleMs: ackMs, maxMs: counted.maxMs } };
}
