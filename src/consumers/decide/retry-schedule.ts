import type { RetryPolicy } from "../../sources/config";

/**
 * Delay before retry number `retryNumber` (1-based): base × 2^(n−1), capped, with ±jitter so that a burst of
 * failures does not come back in lockstep. With the defaults: 30 s, 60 s, 2 min, … 8.5 h, 17 h; twelve retries
 * add up to about 34 hours (docs/processing.md, "The retry schedule").
 */
export function retryDelaySeconds(
  policy: RetryPolicy,
  retryNumber: number,
  random: () => number = Math.random,
): number {
  const exponential = policy.baseDelaySeconds * 2 ** Math.max(0, retryNumber - 1);
  const capped = Math.min(exponential, policy.maxDelaySeconds);
  const jittered = capped * (1 + policy.jitter * (2 * random() - 1));
  return Math.max(1, Math.round(jittered));
}

/**
 * The wait before the next attempt. A destination's Retry-After is its own statement of when it can take
 * more, so it replaces our backoff — bounded by the policy's cap, so no destination can park work for weeks.
 */
export function nextRetryDelaySeconds(
  policy: RetryPolicy,
  retryNumber: number,
  retryAfterSeconds: number | null,
): number {
  if (retryAfterSeconds !== null) return Math.min(Math.max(retryAfterSeconds, 1), policy.maxDelaySeconds);
  return retryDelaySeconds(policy, retryNumber);
}

/** Retry-After as seconds (delta or HTTP date), or null when absent or unreadable. */
export function parseRetryAfter(value: string | null, now: number): number | null {
  if (!value) return null;
  if (/^\d+$/.test(value.trim())) return Number(value.trim());
  const date = Date.parse(value);
  return Number.isNaN(date) ? null : Math.max(0, Math.ceil((date - now) / 1000));
}

/** Queues refuse delays over 12 hours; longer waits are re-checked against next_attempt_at when they come back. */
export const QUEUE_MAX_DELAY_SECONDS = 43_200;
