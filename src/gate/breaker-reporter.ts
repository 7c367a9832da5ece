/**
 * How a gate's breaker names itself to the system monitor. Its own module because both sides use it: the gate
 * reports (gate.ts) and the cron reads the route back (src/reconcile/route-gates.ts).
 */

const BREAKER_REPORTER_PREFIX = "route:";

/** Who reports a gate's breaker to the system monitor (the `route-breaker-open` alert). */
export function breakerReporter(gate: string): string {
  return `${BREAKER_REPORTER_PREFIX}${gate}`;
}

/** The route a breaker reporter names; null for any other reporter. Names never hold a "/" (src/sources/config.ts). */
export function routeOfBreakerReporter(reporter: string): { source: string; route: string } | null {
  if (!reporter.startsWith(BREAKER_REPORTER_PREFIX)) return null;
  const [source, route, ...rest] = reporter.slice(BREAKER_REPORTER_PREFIX.length).split("/");
  return source && route && rest.length === 0 ? { source, route } : null;
}
