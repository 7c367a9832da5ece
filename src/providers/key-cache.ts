/**
 * The per-isolate cache of keys fetched from senders' pinned hosts (src/providers/key-fetch.ts), built so that what
 * an unverified request names (a Plaid `kid`, an SNS `SigningCertURL`) can neither multiply fetches nor push out
 * the keys genuine deliveries need:
 *   - a refusal (no such key) is remembered for REFUSAL_TTL_MS, so repeating a forged name costs no fetch;
 *   - an outage is never remembered: the next delivery tries again;
 *   - at most MAX_FETCHES_IN_FLIGHT loads run at once per source; past that the answer is `unavailable` (a 503 the
 *     genuine sender retries), and no fetch is made;
 *   - at most MAX_LOADS_PER_WINDOW loads start per source per LOAD_WINDOW_MS; past that a name not cached is
 *     answered `unavailable` the same way, without a fetch. The refusals kept are bounded (below), so an attacker
 *     cycling more forged names than fit would otherwise make every one a fetch; this bounds the fetches whatever
 *     the names, while keys already cached keep verifying. A genuine key first seen meanwhile is retried by its
 *     sender and fetched once the window turns;
 *   - a key that has verified a delivery (`proved`) moves to a set only other proven keys can evict. Fetched keys
 *     nobody has verified with yet, and refusals, share a bounded first-in-first-out set of their own.
 */

export type Fetched<T> = { kind: "found"; value: T } | { kind: "refused" } | { kind: "unavailable"; busy?: true };

/** Long enough that a flood of one forged name costs one fetch; short enough that a key published late is seen. */
export const REFUSAL_TTL_MS = 5 * 60_000;
/** Loads one source may have waiting on a key host at once. */
export const MAX_FETCHES_IN_FLIGHT = 4;
/** Fresh loads one source may start per window: far more than a sender rotates through, far fewer than a flood. */
export const MAX_LOADS_PER_WINDOW = 32;
export const LOAD_WINDOW_MS = 60_000;
/** Fetched-but-unverified keys and refusals: names an attacker picks land here, so it is bounded. */
export const MAX_UNPROVEN_ENTRIES = 64;
/** Enough for every key a sender rotates through; only keys that verified a delivery get in. */
const MAX_PROVEN_KEYS = 16;

interface LoadWindow {
  startedAt: number;
  loads: number;
}

/**
 * The source's load window once one more load starts, or null when its window has no loads left. A clock that
 * went backwards (never in production; a test's pinned clock) starts a new window rather than a long one.
 */
export function afterLoad(window: LoadWindow | undefined, now: number): LoadWindow | null {
  if (!window || now - window.startedAt >= LOAD_WINDOW_MS || now < window.startedAt)
    return { startedAt: now, loads: 1 };
  return window.loads >= MAX_LOADS_PER_WINDOW ? null : { startedAt: window.startedAt, loads: window.loads + 1 };
}

interface Unproven<T> {
  outcome: { kind: "found"; value: T } | { kind: "refused" };
  expiresAt: number;
}

export class KeyCache<T> {
  private readonly proven = new Map<string, T>();
  private readonly unproven = new Map<string, Unproven<T>>();
  private readonly loading = new Map<string, Promise<Fetched<T>>>();
  private readonly inFlight = new Map<string, number>();
  private readonly loadWindows = new Map<string, LoadWindow>();

  /** Read through `Date` at each call (not a reference kept from module load), so a test can pin the clock. */
  constructor(private readonly clock: () => number = () => Date.now()) {}

  /**
   * The key `cacheKey` names, from the cache or from `load`. Concurrent requests for one key share one load; `scope`
   * (the source) is what the in-flight cap counts against.
   */
  async get(cacheKey: string, scope: string, load: () => Promise<Fetched<T>>): Promise<Fetched<T>> {
    const proven = this.proven.get(cacheKey);
    if (proven !== undefined) return { kind: "found", value: proven };
    const known = this.unproven.get(cacheKey);
    if (known && known.expiresAt > this.clock()) return known.outcome;
    if (known) this.unproven.delete(cacheKey);
    const pending = this.loading.get(cacheKey);
    if (pending) return pending;

    const running = this.inFlight.get(scope) ?? 0;
    if (running >= MAX_FETCHES_IN_FLIGHT) return { kind: "unavailable", busy: true };
    const window = afterLoad(this.loadWindows.get(scope), this.clock());
    if (!window) return { kind: "unavailable", busy: true };
    this.loadWindows.set(scope, window);
    this.inFlight.set(scope, running + 1);
    const loading = load().catch((): Fetched<T> => ({ kind: "unavailable" }));
    this.loading.set(cacheKey, loading);
    try {
      const outcome = await loading;
      if (outcome.kind !== "unavailable") this.remember(cacheKey, outcome);
      return outcome;
    } finally {
      this.loading.delete(cacheKey);
      const left = (this.inFlight.get(scope) ?? 1) - 1;
      if (left > 0) this.inFlight.set(scope, left);
      else this.inFlight.delete(scope);
    }
  }

  /** The key under `cacheKey` has just verified a delivery: from now on only another proven key can evict it. */
  proved(cacheKey: string, value: T): void {
    this.unproven.delete(cacheKey);
    // Re-inserting keeps the most recently useful key last, so the one evicted is the one unused longest.
    this.proven.delete(cacheKey);
    this.proven.set(cacheKey, value);
    if (this.proven.size > MAX_PROVEN_KEYS) this.proven.delete(this.proven.keys().next().value!);
  }

  clear(): void {
    this.proven.clear();
    this.unproven.clear();
    this.loadWindows.clear();
  }

  private remember(cacheKey: string, outcome: Unproven<T>["outcome"]): void {
    if (this.proven.has(cacheKey)) return;
    if (this.unproven.size >= MAX_UNPROVEN_ENTRIES) this.unproven.delete(this.unproven.keys().next().value!);
    this.unproven.set(cacheKey, {
      outcome,
      expiresAt: outcome.kind === "found" ? Number.POSITIVE_INFINITY : this.clock() + REFUSAL_TTL_MS,
    });
  }
}
