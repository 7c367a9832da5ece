import { type Decision, decide } from "../decide/decide";
import type { FinishedAttempt } from "./commit-statements";
import { effectDeferred, type FannedOut } from "./delivery-rows";

/**
 * What an event's commit writes once its batch aborted, as a pure function of what the abort was found to be
 * (commit.ts finds that out from stored state and at most one more write). One route's failure never repeats or
 * delays another's: a further route's effect that cannot commit is left to its own delivery (pending, due at once, on
 * its own message), and the receipt's own delivery commits as it was decided when its own statements go through.
 */

export type AbortCause =
  /** Another run wrote this event's fan-out first (and committed it, or not): that run's deliveries stand. */
  | { kind: "fanned-out-elsewhere"; committed: boolean }
  /** Written again with every further route's effect left to its delivery, the batch went through. */
  | { kind: "further-effect" }
  /** The event's own statements (its guard, version gate or effect) or D1 itself: the outcome the stored state explains. */
  | { kind: "own"; explained: Decision };

/** An attempt as its commit writes it (after an abort: its fan-out, if it still writes one) and the receipt's decision. */
export interface AttemptToWrite {
  attempt: FinishedAttempt;
  decision: Decision;
}

export function abortOutcome(attempt: FinishedAttempt, decision: Decision, cause: AbortCause): AttemptToWrite {
  switch (cause.kind) {
    case "fanned-out-elsewhere":
      return {
        attempt: { ...attempt, fanOut: undefined },
        decision: cause.committed ? decide({ status: "duplicate" }, attempt.facts) : decision,
      };
    case "further-effect":
      return { attempt: withEffectsDeferred(attempt), decision };
    case "own":
      return { attempt: withEffectsDeferred(attempt), decision: cause.explained };
  }
}

/**
 * Whether a further route's effect could have aborted the batch: only then is the attempt worth writing again with
 * those effects deferred. Otherwise that write is the same batch, and would abort the same way.
 */
export function furtherEffectMayAbort(fanOut: FannedOut | undefined): boolean {
  if (!fanOut || fanOut.deferEffects) return false;
  return fanOut.further.some((delivery) => effectDeferred(delivery, true) && !effectDeferred(delivery, false));
}

function withEffectsDeferred(attempt: FinishedAttempt): FinishedAttempt {
  return attempt.fanOut ? { ...attempt, fanOut: { ...attempt.fanOut, deferEffects: true } } : attempt;
}
