import { recordAttempt } from "../../lib/analytics";
import { logEvent, logsSuccesses } from "../../lib/log";
import type { FinishedAttempt } from "../commit/commit-statements";
import type { Decision } from "../decide/decide";

/**
 * A log line and a metrics point per attempt, from the decision that was committed — except for the routine
 * success: a processed attempt writes no point (the delivery's point already counts the event, and the receipt's
 * status and processed_at in D1 record the outcome), and its line only with LOG_SUCCESSES = "true". That keeps the
 * happy path to one Analytics Engine point per event (docs/performance.md, "What the figures decided").
 */
export function logAttempt(env: Env, finished: FinishedAttempt, decision: Decision): void {
  const { receipt } = finished;
  const outcome =
    decision.kind === "commit"
      ? decision.result.status
      : decision.kind === "nothing"
        ? finished.run.result.status
        : decision.attempt.outcome;
  const httpStatus =
    decision.kind === "fail"
      ? decision.attempt.httpStatus
      : decision.kind === "commit" && decision.result.status === "processed"
        ? (decision.result.httpStatus ?? null)
        : null;
  const durationMs = finished.facts.finishedAt - finished.startedAt;
  if (outcome === "processed") {
    if (!logsSuccesses(env)) return;
  } else {
    recordAttempt(env, { source: receipt.source, outcome, httpStatus, durationMs, attempt: finished.generation });
  }
  logEvent("attempt", {
    source: receipt.source,
    eventKey: receipt.eventKey,
    eventType: receipt.eventType,
    receipt: receipt.receiptId,
    route: receipt.route,
    attempt: finished.generation,
    outcome,
    httpStatus,
    error:
      decision.kind === "fail"
        ? decision.lastError
        : decision.kind === "nothing"
          ? (decision.record?.note ?? "leased by another consumer")
          : null,
    note: decision.kind === "commit" && decision.result.status === "skipped" ? decision.result.reason : undefined,
    durationMs,
  });
}
