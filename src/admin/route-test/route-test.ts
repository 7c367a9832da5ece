import { apiError } from "../../lib/errors";
import type { SourceRoute } from "../../sources/config";
import { lookupSource } from "../../sources/registry";
import { type EvaluatedOutcome, type RouteOutcome, routeOutcome } from "./route-outcome";
import { addOutcome, emptyTally, type RouteTally } from "./route-tally";
import type { RouteTestRequest } from "./route-test-request";
import { newestStoredEvents } from "./stored-events";

/**
 * `route test --last N`: a source's newest stored events run through its routes as they are configured now, or as a
 * draft would have them, by the consumer's own route function. Reads only: nothing is sent, enqueued or written
 * (docs/cli.md, "route test"). With a draft, each event whose outcome on some route differs from now's is a change.
 */

/** Changed (event, route) pairs copied into the answer; every further one is counted in `leftOut`. */
export const MAX_LISTED_CHANGES = 20;

export interface RouteChange {
  receiptId: string;
  eventKey: string;
  eventType: string | null;
  route: string;
  /** null: the route is not in that config. */
  current: RouteOutcome | null;
  draft: RouteOutcome | null;
}

export interface RouteTestReport {
  source: string;
  /** Which config `routes` counts: the one the Worker runs now, or the draft sent. */
  config: "current" | "draft";
  last: number;
  receipts: { read: number; evaluated: number; bodyPastRetention: number; bodyFailedIntegrity: number };
  routes: RouteTally[];
  /** With a draft: now's counts beside it (absent when the source is not valid now). */
  currentRoutes?: RouteTally[];
  changes?: { events: number; listed: RouteChange[]; leftOut: number };
}

export async function testRoutes(env: Env, source: string, request: RouteTestRequest): Promise<RouteTestReport> {
  const current = currentRoutes(env, source, request.draft !== null);
  const draft = request.draft?.routes ?? null;
  const only = (routes: readonly SourceRoute[] | null) =>
    routes && request.route !== null ? routes.filter(({ rules }) => rules.name === request.route) : routes;
  const [now, next] = [only(current), only(draft)];
  if (request.route !== null && !now?.length && !next?.length) {
    const names = [...(current ?? []), ...(draft ?? [])].map(({ rules }) => rules.name);
    throw apiError(
      404,
      "unknown_route",
      `Source ${source} has no route ${JSON.stringify(request.route)}${draft ? " now or in the draft" : ""}; its routes: ${[...new Set(names)].join(", ")}.`,
    );
  }
  const tested = (next ?? now)!;
  const report: RouteTestReport = {
    source,
    config: next ? "draft" : "current",
    last: request.last,
    receipts: { read: 0, evaluated: 0, bodyPastRetention: 0, bodyFailedIntegrity: 0 },
    routes: tested.map(emptyTally),
    ...(next && now ? { currentRoutes: now.map(emptyTally), changes: { events: 0, listed: [], leftOut: 0 } } : {}),
  };
  for await (const page of newestStoredEvents(env, source, request.last)) {
    for (const stored of page) {
      report.receipts.read += 1;
      if (stored.kind === "gone") report.receipts.bodyPastRetention += 1;
      if (stored.kind === "corrupt") report.receipts.bodyFailedIntegrity += 1;
      if (stored.kind !== "event") continue;
      report.receipts.evaluated += 1;
      const testedOutcomes = await outcomesOf(tested, stored.event);
      tally(report.routes, testedOutcomes);
      if (!next || !now || !report.currentRoutes || !report.changes) continue;
      const nowOutcomes = await outcomesOf(now, stored.event);
      tally(report.currentRoutes, nowOutcomes);
      const changed = changedRoutes(nowOutcomes, testedOutcomes);
      if (changed.length > 0) report.changes.events += 1;
      for (const route of changed) {
        if (report.changes.listed.length >= MAX_LISTED_CHANGES) {
          report.changes.leftOut += 1;
          continue;
        }
        const { receiptId, eventKey, eventType } = stored;
        report.changes.listed.push({
          receiptId,
          eventKey,
          eventType,
          route,
          current: nowOutcomes.get(route)?.outcome ?? null,
          draft: testedOutcomes.get(route)?.outcome ?? null,
        });
      }
    }
  }
  return report;
}

/** The routes the Worker runs now; null when it runs none for this source (then only a draft can be tested). */
function currentRoutes(env: Env, source: string, hasDraft: boolean): readonly SourceRoute[] | null {
  const found = lookupSource(env, source);
  if (found.kind === "valid") return found.source.routes;
  if (hasDraft) return null;
  if (found.kind === "invalid")
    throw apiError(
      409,
      "source_invalid",
      `Source ${source} is out of service: ${found.problems.join("; ")}. Send a fixed draft to test it.`,
    );
  throw apiError(404, "unknown_source", `No source ${source} is configured.`);
}

async function outcomesOf(
  routes: readonly SourceRoute[],
  event: Parameters<typeof routeOutcome>[1],
): Promise<Map<string, EvaluatedOutcome>> {
  const outcomes = new Map<string, EvaluatedOutcome>();
  for (const route of routes) outcomes.set(route.rules.name, await routeOutcome(route, event));
  return outcomes;
}

function tally(tallies: RouteTally[], outcomes: Map<string, EvaluatedOutcome>): void {
  for (const routeTally of tallies) addOutcome(routeTally, outcomes.get(routeTally.route)!.outcome);
}

/** The routes, of either config, whose outcome for the event differs (a route only one config has always does). */
export function changedRoutes(now: Map<string, EvaluatedOutcome>, next: Map<string, EvaluatedOutcome>): string[] {
  const names = [...new Set([...now.keys(), ...next.keys()])];
  return names.filter((name) => now.get(name)?.comparable !== next.get(name)?.comparable);
}
