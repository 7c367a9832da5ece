import type { RetryPolicy } from "../../sources/config";
import { nextRetryDelaySeconds, QUEUE_MAX_DELAY_SECONDS } from "./retry-schedule";

/**
 * What happens after an attempt, as a pure function of its result and the source's policy: the receipt's next
 * state, whether the attempt earns a row in `attempts`, and what the queue message should do. No I/O here.
 */

export type AttemptResult =
  | { status: "processed"; httpStatus?: number | null }
  | { status: "skipped"; reason: string }
  | { status: "stale"; againstVersion: number; note?: string }
  /** The event's outcome was committed by an earlier run (a replay, a redelivery, a lease taken over). */
  | { status: "duplicate" }
  /** Another consumer took the lease this attempt needed first: it did nothing, and records nothing. */
  | { status: "leased-elsewhere"; retryAfterSeconds: number }
  | { status: "retry" | "unknown"; error: string; httpStatus?: number | null; retryAfterSeconds?: number | null }
  | { status: "dead"; error: string; httpStatus?: number | null };

export type QueueVerdict =
  | { kind: "done"; status: string }
  /**
   * Back on the queue after `delaySeconds`. `notStarted`: no attempt could start in this invocation (it ran out of
   * time first), so nothing happened to the delivery here; a hold or a backoff that merely rounds to 0 s has none.
   */
  | { kind: "retry"; delaySeconds: number; notStarted?: true };

/** The verdict of a delivery whose attempt could not start in this invocation: back at once, for one with time. */
export const NOT_STARTED: QueueVerdict = { kind: "retry", delaySeconds: 0, notStarted: true };

/**
 * The receipts whose verdict sends them back on the queue, grouped by their delay: one message per delay.
 *
 * @example
 * retriesByDelay([["r1", { kind: "retry", delaySeconds: 30 }], ["r2", { kind: "done", status: "processed" }]])
 * // Map { 30 => ["r1"] }
 */
export function retriesByDelay(verdicts: Iterable<readonly [string, QueueVerdict]>): Map<number, string[]> {
  const byDelay = new Map<number, string[]>();
  for (const [receiptId, verdict] of verdicts) {
    if (verdict.kind !== "retry") continue;
    const receiptIds = byDelay.get(verdict.delaySeconds);
    if (receiptIds) receiptIds.push(receiptId);
    else byDelay.set(verdict.delaySeconds, [receiptId]);
  }
  return byDelay;
}

export interface AttemptFacts {
  policy: RetryPolicy | undefined;
  /** Attempts in this run, the one just made included. */
  attemptNumberInRun: number;
  /** When this run's retry budget began: the receipt's arrival, or its latest replay (a replay starts afresh). */
  budgetStartedAt: number;
  finishedAt: number;
}

export type Decision =
  /** The outcome commits with the effect (processed, stale) or alone (skipped); see commit.ts. */
  | {
      kind: "commit";
      result: Extract<AttemptResult, { status: "processed" | "skipped" | "stale" }>;
      queue: QueueVerdict;
    }
  /** Nothing applied; `record` says whether the attempt is worth an attempts row (a duplicate run is). */
  | { kind: "nothing"; queue: QueueVerdict; record: { note: string } | null }
  | {
      kind: "fail";
      receiptStatus: "pending" | "dead";
      nextAttemptAt: number | null;
      lastError: string;
      attempt: { outcome: "retry" | "unknown" | "dead"; error: string; httpStatus: number | null };
      queue: QueueVerdict;
    };

const MAX_ERROR_CHARS = 500;

/** The error of an attempt whose lease ran out before it finished: its consumer died, or overran its lease. */
export const ABANDONED_ATTEMPT = "lease expired before the attempt finished";

/** What a receipt's retry budget is judged by. */
export interface BudgetFacts {
  attempts: number;
  receivedAt: number;
  replayedAt: number | null;
}

/** When a receipt's retry budget began: its arrival, or its latest replay (a replay starts afresh). */
export function budgetStartOf(receipt: BudgetFacts): number {
  return Math.max(receipt.receivedAt, receipt.replayedAt ?? 0);
}

/**
 * An attempt whose lease ran out before it finished (its consumer died, perhaps killed by this very event), decided
 * like any other as `unknown`: it was counted when it took its lease, so once the count spends the retry budget
 * (or max_age has passed) the receipt is dead without another run. The consumer that finds it and the cron's lease
 * return both decide it here, so neither can give a spent receipt one more run.
 */
export function decideAbandoned(
  receipt: BudgetFacts,
  policy: RetryPolicy | undefined,
  now: number,
): { facts: AttemptFacts; decision: Decision } {
  const facts = {
    policy,
    attemptNumberInRun: receipt.attempts,
    budgetStartedAt: budgetStartOf(receipt),
    finishedAt: now,
  };
  return { facts, decision: decide({ status: "unknown", error: ABANDONED_ATTEMPT }, facts) };
}

export function decide(result: AttemptResult, facts: AttemptFacts): Decision {
  switch (result.status) {
    case "processed":
    case "skipped":
    case "stale":
      return { kind: "commit", result, queue: { kind: "done", status: result.status } };
    case "duplicate":
      return {
        kind: "nothing",
        queue: { kind: "done", status: "duplicate" },
        record: { note: "already committed by an earlier run; nothing applied" },
      };
    case "leased-elsewhere":
      return {
        kind: "nothing",
        queue: { kind: "retry", delaySeconds: clampQueueDelay(result.retryAfterSeconds) },
        record: null,
      };
    case "dead":
      return deadDecision(result.error, "dead", result.httpStatus ?? null);
    case "retry":
    case "unknown": {
      const { policy } = facts;
      const error = result.error.slice(0, MAX_ERROR_CHARS);
      const httpStatus = result.httpStatus ?? null;
      if (!policy || facts.attemptNumberInRun > policy.maxRetries) {
        const outcome = result.status === "unknown" ? "unknown" : "dead";
        return deadDecision(`gave up after ${facts.attemptNumberInRun} attempts: ${error}`, outcome, httpStatus);
      }
      const delaySeconds = nextRetryDelaySeconds(
        policy,
        facts.attemptNumberInRun,
        result.status === "retry" ? (result.retryAfterSeconds ?? null) : null,
      );
      const nextAttemptAt = facts.finishedAt + delaySeconds * 1000;
      const deadline = facts.budgetStartedAt + (policy.maxAgeMs ?? Number.POSITIVE_INFINITY);
      if (nextAttemptAt > deadline) {
        const outcome = result.status === "unknown" ? "unknown" : "dead";
        return deadDecision(
          `retry deadline (max_age) passed after ${facts.attemptNumberInRun} attempts: ${error}`,
          outcome,
          httpStatus,
        );
      }
      return {
        kind: "fail",
        receiptStatus: "pending",
        nextAttemptAt,
        lastError: error,
        attempt: { outcome: result.status, error, httpStatus },
        queue: { kind: "retry", delaySeconds: clampQueueDelay(delaySeconds) },
      };
    }
  }
}

function deadDecision(error: string, outcome: "dead" | "unknown", httpStatus: number | null): Decision {
  const lastError = error.slice(0, MAX_ERROR_CHARS);
  return {
    kind: "fail",
    receiptStatus: "dead",
    nextAttemptAt: null,
    lastError,
    attempt: { outcome, error: lastError, httpStatus },
    queue: { kind: "done", status: "dead" },
  };
}

export function clampQueueDelay(seconds: number): number {
  return Math.min(QUEUE_MAX_DELAY_SECONDS, Math.max(0, Math.ceil(seconds)));
}
