import { routeOfBreakerReporter } from "../gate/breaker-reporter";
import { plural } from "../lib/plural";
import type { IssueCondition, IssueKind } from "../monitor/issues/types";
import type { SystemAlertKind } from "../monitor/observation";
import type { AlertCondition } from "./alerting";

/**
 * The conditions the receiver already watches, as issue conditions (src/monitor/issues/): the system monitor's own
 * alerts (breakers, stores) and what the cron's watch reads from D1 (silence, backlog age, dead letters per route).
 */

/** The issue kinds the system monitor's alerts decide: it always knows all of them. */
export const SYSTEM_ISSUE_KINDS: readonly IssueKind[] = ["breaker-open", "store-near-limit"];

const STORE_SEVERITY: Partial<Record<SystemAlertKind, "warning" | "critical">> = {
  "d1-storage": "warning",
  "shard-storage": "warning",
  "d1-full": "critical",
  "shard-full": "critical",
};

/** Dead letters on one route from this many on make its issue critical. */
export const DEAD_LETTERS_CRITICAL = 100;

export function systemIssueConditions(
  alerts: readonly { kind: SystemAlertKind; state: string; message: string; reporters: readonly string[] }[],
): IssueCondition[] {
  const conditions: IssueCondition[] = [];
  for (const alert of alerts) {
    if (alert.state !== "open") continue;
    if (alert.kind === "route-breaker-open") {
      for (const reporter of alert.reporters) {
        const route = routeOfBreakerReporter(reporter);
        if (route === null) continue;
        conditions.push({
          kind: "breaker-open",
          ...route,
          store: null,
          severity: "critical",
          message: `The circuit breaker of route ${route.route} is open: its deliveries are held, one probe at a time, until one succeeds.`,
        });
      }
      continue;
    }
    const severity = STORE_SEVERITY[alert.kind];
    if (severity === undefined) continue;
    for (const store of alert.reporters) {
      conditions.push({
        kind: "store-near-limit",
        source: null,
        route: null,
        store,
        severity,
        // The incident's message names the first reporter's size; another store gets the plain fact.
        message:
          alert.reporters.length === 1
            ? alert.message
            : `${store} is ${severity === "critical" ? "at" : "near"} its size limit (${alert.kind}).`,
      });
    }
  }
  return conditions;
}

/** The watch's silence and pending-age conditions that fire, as issues of the source. */
export function sourceIssueConditions(conditions: readonly AlertCondition[]): IssueCondition[] {
  const kinds: Partial<Record<AlertCondition["kind"], IssueKind>> = {
    silence: "silence",
    "pending-age": "backlog-age",
  };
  return conditions.flatMap((condition) => {
    const kind = kinds[condition.kind];
    if (kind === undefined || !condition.firing) return [];
    const message = condition.message.charAt(0).toUpperCase() + condition.message.slice(1);
    return [
      {
        kind,
        source: condition.source,
        route: null,
        store: null,
        severity: "warning" as const,
        message: `${message}.`,
      },
    ];
  });
}

export function deadLetterConditions(
  counts: readonly { source: string; route: string; dead: number }[],
): IssueCondition[] {
  return counts
    .filter((count) => count.dead > 0)
    .map((count) => ({
      kind: "dead-letters" as const,
      source: count.source,
      route: count.route,
      store: null,
      severity: count.dead >= DEAD_LETTERS_CRITICAL ? ("critical" as const) : ("warning" as const),
      message: `${plural(count.dead, "dead delivery", "dead deliveries")} on route ${count.route}, waiting for an operator: replay, or dismiss once the cause is fixed.`,
    }));
}
