import { and, eq } from "drizzle-orm";
import { batchEach, batchPerItem, perItem } from "../db/batch";
import { database } from "../db/client";
import { routeGates } from "../db/schema";
import { breakerReporter, routeOfBreakerReporter } from "../gate/breaker-reporter";
import { deliveryGate, gateName } from "../gate/client";
import { gateRegistration } from "../gate/known-gates";
import { logEvent } from "../lib/log";
import type { Observation } from "../monitor/observation";
import { reportObservations, systemMonitor } from "../monitor/report";
import { loadSources, sourceProblems } from "../sources/registry";
import { type GatedRoute, type KnownGate, planRouteGates, type RouteRef } from "./route-gates-plan";

/**
 * The cron's route-gates step (docs/routing.md "When a route leaves the config"): a gate whose route a deploy
 * removed, renamed or took every control option from is never asked again, so nothing but this step clears what it
 * holds — an admin pause, held deliveries, an open breaker and its `route-breaker-open` alert, which would keep
 * /health degraded for good. Once the route has been absent in two runs in a row, its gate is forgotten and its
 * alert resolved, so a route of that name added again starts running, with a closed breaker. A route that keeps a
 * gate but lost its breaker has the breaker closed and the alert resolved at once (its next attempt would, but
 * there may be none). What each run decides is route-gates-plan.ts; this only reads and writes.
 *
 * Per run: one read of `route_gates` (one row per gated route, plus the absent ones not yet forgotten), one call to
 * the system monitor, one D1 batch of at most 50 row writes, at most 10 gate calls and one batch deleting the
 * forgotten routes' rows, and one report to the monitor when an alert resolves.
 */

export interface RouteGateCounts {
  /** Routes newly known to have a gate. */
  registered: number;
  /** Known routes found absent from the config this run, not yet forgotten. */
  absent: number;
  /** Gates forgotten: their route left the config. */
  forgotten: number;
  /** Deliveries those gates held for a resume: each is still a D1 row that looks again on its own. */
  heldForgotten: number;
  /** Breakers closed because the route's config has none any more. */
  breakersClosed: number;
}

export const NO_ROUTE_GATE_COUNTS: RouteGateCounts = {
  registered: 0,
  absent: 0,
  forgotten: 0,
  heldForgotten: 0,
  breakersClosed: 0,
};

export async function tidyRouteGates(env: Env): Promise<RouteGateCounts> {
  // Throws when SOURCES itself is unreadable: the step fails and nothing is forgotten.
  const sources = [...loadSources(env).values()];
  const refusedSources = new Set(sourceProblems(env).keys());
  const gated: GatedRoute[] = sources.flatMap((source) =>
    source.routes.flatMap(({ rules }) =>
      rules.control === null
        ? []
        : [{ source: source.name, route: rules.name, breaker: rules.control.breaker !== null }],
    ),
  );
  const db = database(env);
  const known: KnownGate[] = await db.select().from(routeGates);
  const breakerAlerts = (await systemMonitor(env).list())
    .filter((alert) => alert.kind === "route-breaker-open" && alert.state === "open")
    .flatMap((alert) => alert.reporters.flatMap((reporter) => routeOfBreakerReporter(reporter) ?? []));
  const plan = planRouteGates({ gated, refusedSources, known, breakerAlerts });

  const written = await batchPerItem(db, {
    register: perItem(plan.register, (row) => gateRegistration(db, row.source, row.route, row.absentRuns)),
    present: perItem(plan.present, (row) => db.update(routeGates).set({ absentRuns: 0 }).where(sameRoute(row))),
    // Counted once per run however many runs overlap: only the run that read this count moves it on.
    absent: perItem(plan.absent, (row) =>
      db
        .update(routeGates)
        .set({ absentRuns: row.absentRuns + 1 })
        .where(and(sameRoute(row), eq(routeGates.absentRuns, row.absentRuns))),
    ),
  });

  // The gate first, its row after: a gate that does not answer keeps its row, and a later run forgets it.
  const forgotten = await Promise.all(
    plan.forget.map(async (row) => ({ row, held: await deliveryGate(env, row.source, row.route).forget() })),
  );
  await batchEach(db, plan.forget, (row) =>
    db.delete(routeGates).where(and(sameRoute(row), eq(routeGates.absentRuns, row.absentRuns))),
  );
  await Promise.all(plan.closeBreaker.map((route) => deliveryGate(env, route.source, route.route).closeBreaker()));

  const quiet: Observation[] = [
    ...forgotten
      .filter(({ row, held }) => row.alertOpen || held.breakerOpen)
      .map(({ row }) =>
        breakerQuiet(
          row,
          `Route ${gateName(row.source, row.route)} left the config; its circuit breaker is forgotten.`,
        ),
      ),
    ...plan.closeBreaker.map((route) =>
      breakerQuiet(
        route,
        `Route ${gateName(route.source, route.route)} has no circuit breaker in its config any more; it is closed.`,
      ),
    ),
  ];
  if (quiet.length > 0) await reportObservations(env, quiet, true);

  for (const { row, held } of forgotten)
    logEvent("route_gate.forgotten", {
      source: row.source,
      route: row.route,
      paused: held.paused,
      breakerOpen: held.breakerOpen,
      held: held.held,
    });
  return {
    registered: written.register.filter(({ result }) => result.meta.changes > 0).length,
    absent: written.absent.filter(({ result }) => result.meta.changes > 0).length,
    forgotten: forgotten.length,
    heldForgotten: forgotten.reduce((sum, { held }) => sum + held.held, 0),
    breakersClosed: plan.closeBreaker.length,
  };
}

function sameRoute(route: RouteRef) {
  return and(eq(routeGates.source, route.source), eq(routeGates.route, route.route));
}

function breakerQuiet(route: RouteRef, message: string): Observation {
  return {
    kind: "route-breaker-open",
    reporter: breakerReporter(gateName(route.source, route.route)),
    firing: false,
    message,
  };
}
