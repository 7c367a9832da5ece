import { describe, expect, it } from "vitest";
import {
  type AttemptFacts,
  budgetStartOf,
  clampQueueDelay,
  decide,
  decideAbandoned,
  NOT_STARTED,
  retriesByDelay,
} from "../../src/consumers/decide/decide";
import { parseRetryAfter, QUEUE_MAX_DELAY_SECONDS, retryDelaySeconds } from "../../src/consumers/decide/retry-schedule";
import { DEFAULT_RETRY, type RetryPolicy } from "../../src/sources/config";

/**
 * The consumer's verdict after an attempt (src/consumers/decide/decide.ts) at the edges of the retry budget: the last retry
 * the budget allows, a retry falling exactly on max_age, and the units and rounding of what the queue is told.
 * Pure, so each edge is pinned exactly; the end-to-end runs are test/consumers/retry-schedule.test.ts and
 * test/consumers/max-age.test.ts.
 */

const policy: RetryPolicy = { ...DEFAULT_RETRY, jitter: 0, maxRetries: 3 };
const finishedAt = Date.parse("2026-12-01T10:00:00Z");
const facts = (overrides: Partial<AttemptFacts> = {}): AttemptFacts => ({
  policy,
  attemptNumberInRun: 1,
  budgetStartedAt: finishedAt - 60_000,
  finishedAt,
  ...overrides,
});
const failure = { status: "retry", error: "503 from the destination" } as const;

describe("the verdict after a failed attempt", () => {
  it("retries up to max_retries retries (max_retries + 1 attempts), then gives up", () => {
    const last = decide(failure, facts({ attemptNumberInRun: policy.maxRetries }));
    expect(last).toMatchObject({ kind: "fail", receiptStatus: "pending" });
    const spent = decide(failure, facts({ attemptNumberInRun: policy.maxRetries + 1 }));
    expect(spent).toMatchObject({ kind: "fail", receiptStatus: "dead", queue: { kind: "done", status: "dead" } });
  });

  it("still retries when the next attempt falls exactly on the max_age deadline, and gives up one millisecond past it", () => {
    // Attempt 1 waits base_delay_seconds (30 s, no jitter).
    const nextAttemptAt = finishedAt + policy.baseDelaySeconds * 1000;
    const onTheDeadline = decide(failure, facts({ budgetStartedAt: nextAttemptAt - policy.maxAgeMs }));
    expect(onTheDeadline).toMatchObject({ kind: "fail", receiptStatus: "pending", nextAttemptAt });
    const pastIt = decide(failure, facts({ budgetStartedAt: nextAttemptAt - policy.maxAgeMs - 1 }));
    expect(pastIt).toMatchObject({ kind: "fail", receiptStatus: "dead" });
  });

  it("schedules the next attempt in milliseconds and tells the queue whole seconds", () => {
    const decision = decide(failure, facts());
    expect(decision).toMatchObject({
      nextAttemptAt: finishedAt + 30_000,
      queue: { kind: "retry", delaySeconds: 30 },
    });
    const retryAfter = decide({ ...failure, retryAfterSeconds: 7 }, facts());
    expect(retryAfter).toMatchObject({ nextAttemptAt: finishedAt + 7_000, queue: { kind: "retry", delaySeconds: 7 } });
  });

  it("keeps an abandoned attempt's outcome unknown, not dead, when it spends the budget", () => {
    const decision = decide({ status: "unknown", error: "lease expired" }, facts({ attemptNumberInRun: 4 }));
    expect(decision).toMatchObject({ receiptStatus: "dead", attempt: { outcome: "unknown" } });
    const abandoned = decideAbandoned(
      { attempts: 4, receivedAt: finishedAt - 1000, replayedAt: null },
      policy,
      finishedAt,
    );
    expect(abandoned.decision).toMatchObject({ receiptStatus: "dead", attempt: { outcome: "unknown" } });
  });

  it("keeps at most 500 characters of an error, whether it retries or gives up", () => {
    const error = "x".repeat(2000);
    const retried = decide({ status: "retry", error }, facts());
    expect(retried).toMatchObject({ receiptStatus: "pending" });
    if (retried.kind !== "fail") throw new Error("expected a failure verdict");
    expect(retried.lastError).toHaveLength(500);
    expect(retried.attempt.error).toHaveLength(500);
    const dead = decide({ status: "retry", error }, facts({ attemptNumberInRun: 4 }));
    if (dead.kind !== "fail") throw new Error("expected a failure verdict");
    expect(dead.lastError.length).toBeLessThanOrEqual(500);
  });

  it("counts a replayed receipt's budget from its replay, not its arrival", () => {
    expect(budgetStartOf({ attempts: 0, receivedAt: 1_000, replayedAt: 5_000 })).toBe(5_000);
    expect(budgetStartOf({ attempts: 0, receivedAt: 1_000, replayedAt: null })).toBe(1_000);
  });
});

describe("what the queue is told", () => {
  it("rounds a fractional delay up, never to zero, and never past the queue's 12 h limit", () => {
    expect(clampQueueDelay(0.2)).toBe(1);
    expect(clampQueueDelay(29.01)).toBe(30);
    expect(clampQueueDelay(-5)).toBe(0);
    expect(clampQueueDelay(QUEUE_MAX_DELAY_SECONDS + 1)).toBe(QUEUE_MAX_DELAY_SECONDS);
    const leased = decide({ status: "leased-elsewhere", retryAfterSeconds: 0.4 }, facts());
    expect(leased).toMatchObject({ kind: "nothing", queue: { kind: "retry", delaySeconds: 1 } });
  });

  it("waits at least a second, however small a base_delay_seconds rounds to", () => {
    expect(retryDelaySeconds({ ...policy, baseDelaySeconds: 0.2 }, 1)).toBe(1);
    expect(retryDelaySeconds({ ...policy, baseDelaySeconds: 0.2, jitter: 1 }, 1, () => 0)).toBe(1);
  });

  it("reads a Retry-After date already past as no wait at all, never a negative one", () => {
    const now = Date.parse("2026-11-30T10:00:00Z");
    expect(parseRetryAfter("Mon, 30 Nov 2026 09:58:00 GMT", now)).toBe(0);
  });
});

describe("retries grouped by delay (one queue message per delay)", () => {
  it("groups only the verdicts that go back on the queue, each delay once, in the order each first appears", () => {
    const grouped = retriesByDelay([
      ["r1", { kind: "retry", delaySeconds: 30 }],
      ["r2", { kind: "done", status: "processed" }],
      ["r3", NOT_STARTED],
      ["r4", { kind: "retry", delaySeconds: 30 }],
      ["r5", { kind: "retry", delaySeconds: 0 }],
    ]);
    expect([...grouped]).toEqual([
      [30, ["r1", "r4"]],
      [0, ["r3", "r5"]],
    ]);
  });

  it("has nothing to send when every verdict is done", () => {
    expect(retriesByDelay([["r1", { kind: "done", status: "dead" }]]).size).toBe(0);
  });
});
