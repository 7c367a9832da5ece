import { type Database, database } from "../db/client";
import { routeGates } from "../db/schema";

/**
 * The D1 list of routes known to have a gate (`route_gates`): a Durable Object cannot be listed, so the cron finds
 * the gate of a route that left the config here (src/reconcile/route-gates.ts). The cron adds every configured
 * route with a control option; a pause adds its route at once, so a route paused and removed between two cron
 * runs is still found.
 */

/** The statement that makes the route known; a route already known keeps its row as it is. */
export function gateRegistration(db: Database, source: string, route: string, absentRuns = 0) {
  return db.insert(routeGates).values({ source, route, absentRuns }).onConflictDoNothing();
}

export async function registerGate(env: Pick<Env, "DB">, source: string, route: string): Promise<void> {
  await gateRegistration(database(env), source, route);
}
