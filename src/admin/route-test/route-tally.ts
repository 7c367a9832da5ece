import type { SourceRoute } from "../../sources/config";
import { destinationText, type RouteOutcome } from "./route-outcome";

/**
 * Per route, how many stored events it would take, skip or dead-letter, and why: pure counting, so the same tally
 * serves the config under test and, beside a draft, the config as it runs now.
 */

/** Distinct reasons kept per route and kind; every further one is counted under OTHER_REASONS. */
export const MAX_REASONS = 10;
export const OTHER_REASONS = "(other reasons)";

export interface RouteTally {
  route: string;
  destination: string;
  match: number;
  skipped: number;
  wouldDie: number;
  /** By reason (`filtered out by route x`, `the route has no destination`). */
  skipReasons: Record<string, number>;
  /** By error (a schema mismatch, a transform's error, a filter out of steps). */
  dieReasons: Record<string, number>;
}

export function emptyTally(route: SourceRoute): RouteTally {
  return {
    route: route.rules.name,
    destination: destinationText(route.destination),
    match: 0,
    skipped: 0,
    wouldDie: 0,
    skipReasons: {},
    dieReasons: {},
  };
}

export function addOutcome(tally: RouteTally, outcome: RouteOutcome): void {
  if (outcome.kind === "match") tally.match += 1;
  else if (outcome.kind === "skipped") {
    tally.skipped += 1;
    countReason(tally.skipReasons, outcome.reason);
  } else {
    tally.wouldDie += 1;
    countReason(tally.dieReasons, outcome.error);
  }
}

function countReason(reasons: Record<string, number>, reason: string): void {
  const known = reason in reasons || Object.keys(reasons).length < MAX_REASONS;
  const key = known ? reason : OTHER_REASONS;
  reasons[key] = (reasons[key] ?? 0) + 1;
}
