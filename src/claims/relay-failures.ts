import { execCounted } from "../lib/meter";

/**
 * A shard's relay while D1 or the queue is down: the failure streak (kept in `relay_state`, so a fresh instance
 * backs off as far as the last one had), the backoff it sets the alarm to, and when a claim may probe early.
 */

const RELAY_BACKOFF_MAX_MS = 5 * 60_000;
/**
 * While relays fail, a claim arriving at a shard whose backed-off alarm is further off than this brings it forward
 * (at most once per this interval): with traffic flowing, relaying resumes within a second of D1 coming back, and
 * an outage costs one failed D1 read per shard per interval (the relay asks D1 first while failing, so nothing is
 * written to R2 for it: src/relay/database-room.ts), not one per claim. The wait after an outage is idle time the
 * backlog drain pays in full: at 10 s it held a 45 s outage's drain to about 4× the arrival rate in the faulted soak
 * (issue 35, docs/performance.md "Recovery").
 */
export const RELAY_PROBE_MS = 1_000;
/**
 * How long claims held back by a database at its size limit wait before the next try (src/relay/database-room.ts):
 * the alert is already raised, and room comes from an operator or from retention, not within seconds.
 */
export const STORE_FULL_RETRY_MS = 60_000;

export class RelayFailures {
  /** While relays fail (D1 or the queue down), the alarm keeps its backoff: a full batch must not hammer them. */
  failing = false;
  /** While relays fail: when the backed-off alarm is due, and when the last relay failed (for the claim probe). */
  private backedOffUntil = 0;
  private lastFailureAt = 0;

  constructor(private readonly sql: SqlStorage) {}

  /** A relay failed: the streak grows, and the alarm waits this long (doubling from 2 s, at most 5 minutes). */
  failed(now: number): { failures: number; backoffMs: number } {
    const failures = execCounted<{ failures: number }>(
      this.sql,
      `INSERT INTO relay_state (singleton, failures) VALUES (1, 1)
       ON CONFLICT (singleton) DO UPDATE SET failures = failures + 1 RETURNING failures`,
    )[0]!.failures;
    const backoffMs = Math.min(RELAY_BACKOFF_MAX_MS, 1000 * 2 ** Math.min(failures, 9));
    this.failing = true;
    this.lastFailureAt = now;
    this.backedOffUntil = now + backoffMs;
    return { failures, backoffMs };
  }

  /** After a relay that worked: forgets the streak. True if there was one (the alarm was backed off). */
  clear(): boolean {
    this.failing = false;
    this.backedOffUntil = 0;
    return execCounted(this.sql, "DELETE FROM relay_state RETURNING failures").length > 0;
  }

  /** A claim may probe a failing relay early: its backed-off alarm is far off and the last failure is not recent. */
  probeDue(now: number): boolean {
    return this.failing && this.backedOffUntil - now > RELAY_PROBE_MS && now - this.lastFailureAt >= RELAY_PROBE_MS;
  }

  /** A claim is probing now: the backed-off time no longer stands. */
  probing(): void {
    this.backedOffUntil = 0;
  }
}
