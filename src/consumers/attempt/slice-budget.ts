import { type Destination, MAX_DESTINATION_TIMEOUT_MS, type SourceConfig } from "../../sources/config";

/**
 * How long a consumer may go on starting attempts. A queue consumer invocation is stopped after 15 minutes of wall
 * time, and a lease taken for a whole slice up front runs out LEASE_MS after it was taken: an attempt started too
 * late would outlive one or the other, and a second consumer could then run it at once. So an attempt starts only
 * if, at its worst, it still ends (with a minute left to commit its outcome) inside both. One that may not start
 * is no attempt at all: it goes back on the queue at once, its lease released, its retries unspent.
 */

/**
 * Destinations run at once within a batch. A Worker keeps at most six outgoing connections open, and a forward
 * waiting for a connection would spend its own timeout waiting: more in flight buys nothing. The gates admit at most
 * this many at once under a rate limit, so admission and send stay close.
 */
export const ATTEMPTS_IN_FLIGHT = 6;

/** A queue consumer invocation's wall time on Cloudflare. */
export const CONSUMER_WALL_MS = 15 * 60_000;
/** Kept free at the end of a lease or an invocation, to commit what was attempted. */
export const COMMIT_MARGIN_MS = 60_000;

/** The limits one attempt must end inside, each in its own clock's epoch milliseconds. */
export interface AttemptLimits {
  /** Real time (Date.now()) by which the consumer invocation must have committed; Infinity outside a consumer. */
  invocationEndsBy: number;
  /** Attempt-clock time at which the lease this attempt holds from the slice runs out; Infinity without one. */
  leaseUntil: number;
}

/**
 * The least a handler route needs for its attempt to start: one external call at its default timeout
 * (external-calls.ts). Its calls then draw on what the limits leave (externalCallBudgetMs), never more than
 * MAX_DESTINATION_TIMEOUT_MS. Counting the handler at that cap instead would leave a lease taken for the slice (a
 * source with a handler and a forward route) no room for any attempt that waited for a slot: each would be
 * leased, released and sent back, again and again, paying rows and calls for nothing.
 */
export const LEAST_HANDLER_BUDGET_MS = 10_000;

/**
 * The longest one attempt of this source may run before its handlers' external calls are fitted to the limits:
 * its slowest route's forward timeout, or a handler's least budget (a first attempt runs every matched route at once).
 */
export function longestAttemptMs(source: SourceConfig | undefined): number {
  if (!source) return 0;
  return Math.max(0, ...source.routes.map(({ destination }) => longestCallMs(destination)));
}

function longestCallMs(destination: Destination): number {
  switch (destination.kind) {
    case "none":
      return 0;
    case "forward":
    case "listen":
      return destination.timeoutMs;
    case "handler":
      return LEAST_HANDLER_BUDGET_MS;
  }
}

/**
 * What a handler's external calls may spend in an attempt starting at (`realNow`, `attemptNow`): the destination
 * cap, cut so that they end, commit margin included, inside the invocation and inside the lease taken for the
 * slice. Pure.
 */
export function externalCallBudgetMs(limits: AttemptLimits, realNow: number, attemptNow: number): number {
  return Math.max(
    0,
    Math.min(
      MAX_DESTINATION_TIMEOUT_MS,
      limits.invocationEndsBy - COMMIT_MARGIN_MS - realNow,
      limits.leaseUntil - COMMIT_MARGIN_MS - attemptNow,
    ),
  );
}

/** Whether an attempt that may run `longestMs` can start at (`realNow`, `attemptNow`) and still end inside its limits. Pure. */
export function mayStartAttempt(
  limits: AttemptLimits,
  longestMs: number,
  realNow: number,
  attemptNow: number,
): boolean {
  return (
    realNow + longestMs + COMMIT_MARGIN_MS <= limits.invocationEndsBy &&
    attemptNow + longestMs + COMMIT_MARGIN_MS <= limits.leaseUntil
  );
}
