import { plural } from "../lib/plural";
import type { IssueCondition } from "./issues/types";

/**
 * When a route's destination is failing past a threshold without a circuit breaker to say so (kind
 * `destination-failing`), as a pure function of the deliveries each route has waiting for a retry after a failed
 * attempt (src/reconcile/retrying-by-route.ts reads them once per cron run). A route with `circuit_breaker` is left
 * out: its breaker-open issue speaks for it. Dead letters have their own kind; this one is the warning before
 * them, while retries are still being spent.
 */

export interface DestinationThresholds {
  /** Deliveries of one route waiting for a retry from which an issue opens. */
  minRetrying: number;
  /** From this many it is critical. */
  criticalRetrying: number;
}

export const DEFAULT_DESTINATION_THRESHOLDS: DestinationThresholds = { minRetrying: 5, criticalRetrying: 50 };

export interface RetryingCount {
  source: string;
  route: string;
  /** Deliveries waiting for a further attempt after a failed one. */
  retrying: number;
  /** Whether the route has a circuit breaker (then its own issue covers this). */
  breaker: boolean;
}

/**
 * @example
 *   destinationFailingConditions([{ source: "stripe", route: "crm", retrying: 7, breaker: false }])  // a warning
 */
export function destinationFailingConditions(
  counts: readonly RetryingCount[],
  thresholds: DestinationThresholds = DEFAULT_DESTINATION_THRESHOLDS,
): IssueCondition[] {
  return counts
    .filter((count) => !count.breaker && count.retrying >= thresholds.minRetrying)
    .map((count) => ({
      kind: "destination-failing" as const,
      source: count.source,
      route: count.route,
      store: null,
      severity: count.retrying >= thresholds.criticalRetrying ? ("critical" as const) : ("warning" as const),
      message:
        `${plural(count.retrying, "delivery", "deliveries")} on route ${count.route} failed and wait for a retry: ` +
        "its destination is failing (the route has no circuit_breaker to hold the rest).",
    }));
}

/** Thresholds from the optional vars DESTINATION_ISSUE_MIN_RETRYING and DESTINATION_ISSUE_CRITICAL_RETRYING. */
export function destinationThresholds(env: object): DestinationThresholds {
  const vars = env as Record<string, unknown>;
  const number = (name: string, fallback: number) => {
    const value = Number(vars[name]);
    return typeof vars[name] === "string" && Number.isInteger(value) && value >= 1 ? value : fallback;
  };
  return {
    minRetrying: number("DESTINATION_ISSUE_MIN_RETRYING", DEFAULT_DESTINATION_THRESHOLDS.minRetrying),
    criticalRetrying: number("DESTINATION_ISSUE_CRITICAL_RETRYING", DEFAULT_DESTINATION_THRESHOLDS.criticalRetrying),
  };
}
