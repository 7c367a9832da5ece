import { gateName } from "../gate/client";

/**
 * What the cron's route-gates step (route-gates.ts) does in one run, as a pure function of the config, the known
 * gates (D1 `route_gates`) and the open breaker alert's reporters. A gate whose route left the config — removed,
 * renamed, its every control option taken out, or its whole source gone — is forgotten once the route has been
 * absent in FORGET_AFTER_ABSENT_RUNS runs in a row: a deploy still rolling out (two versions answering at once)
 * never costs a live route its pause. A source whose config is refused is left alone: its routes are unknown, not
 * gone. Every list is capped, so a run's work is bounded however much the config changed.
 */

/** Cron runs in a row that must find a route absent before its gate is forgotten. */
export const FORGET_AFTER_ABSENT_RUNS = 2;
/** Rows registered, marked absent or marked present again per run; the rest wait for the next run. */
export const ROUTE_GATE_WRITES_PER_RUN = 50;
/** Gates forgotten or breakers closed per run (one Durable Object call each). */
export const GATE_CALLS_PER_RUN = 10;

export interface RouteRef {
  source: string;
  route: string;
}

/** A row of `route_gates`. */
export interface KnownGate extends RouteRef {
  absentRuns: number;
}

/** A configured route that has a gate (a control option), and whether its control has a circuit breaker. */
export interface GatedRoute extends RouteRef {
  breaker: boolean;
}

export interface RouteGatesInput {
  gated: readonly GatedRoute[];
  /** Sources configured but refused: their routes are not known this run. */
  refusedSources: ReadonlySet<string>;
  known: readonly KnownGate[];
  /** Routes whose breaker alert is open (the `route-breaker-open` reporters). */
  breakerAlerts: readonly RouteRef[];
}

export interface RouteGatesPlan {
  /** Not yet known: inserted with their absent count (0 while configured; 1 for an absent route's open alert). */
  register: KnownGate[];
  /** Known, absent before, configured again: their count goes back to 0. */
  present: RouteRef[];
  /** Absent this run, not yet long enough: their count goes from `absentRuns` to one more. */
  absent: KnownGate[];
  /** Absent long enough: the gate is forgotten, then its row (if still at `absentRuns`) deleted. */
  forget: (KnownGate & { alertOpen: boolean })[];
  /** Configured with a gate but no breaker, yet its breaker alert is open: closed now. */
  closeBreaker: RouteRef[];
}

export function planRouteGates(input: RouteGatesInput): RouteGatesPlan {
  const gated = new Map(input.gated.map((route) => [gateName(route.source, route.route), route]));
  const known = new Map(input.known.map((row) => [gateName(row.source, row.route), row]));
  const alerted = new Set(input.breakerAlerts.map((route) => gateName(route.source, route.route)));
  const judged = (route: RouteRef) => !input.refusedSources.has(route.source);

  const register: KnownGate[] = [];
  for (const [name, route] of gated) if (!known.has(name)) register.push({ ...ref(route), absentRuns: 0 });
  for (const route of input.breakerAlerts) {
    const name = gateName(route.source, route.route);
    if (!gated.has(name) && !known.has(name) && judged(route)) register.push({ ...ref(route), absentRuns: 1 });
  }

  const present: RouteRef[] = [];
  const absent: KnownGate[] = [];
  const forget: RouteGatesPlan["forget"] = [];
  for (const [name, row] of known) {
    if (gated.has(name)) {
      if (row.absentRuns > 0) present.push(ref(row));
    } else if (judged(row)) {
      if (row.absentRuns + 1 >= FORGET_AFTER_ABSENT_RUNS) forget.push({ ...row, alertOpen: alerted.has(name) });
      else absent.push(row);
    }
  }

  const closeBreaker = input.breakerAlerts.filter((route) => {
    const configured = gated.get(gateName(route.source, route.route));
    return configured !== undefined && !configured.breaker;
  });

  // Forgetting and closing first: they are what a stale route waits for; registering a live one can wait a run.
  const calls = budget(GATE_CALLS_PER_RUN);
  const writes = budget(ROUTE_GATE_WRITES_PER_RUN);
  return {
    forget: calls.take(forget),
    closeBreaker: calls.take(closeBreaker),
    absent: writes.take(absent),
    present: writes.take(present),
    register: writes.take(register),
  };
}

function ref(route: RouteRef): RouteRef {
  return { source: route.source, route: route.route };
}

/** Takes from lists in turn, at most `cap` items in all. */
function budget(cap: number) {
  let left = cap;
  return {
    take<T>(list: readonly T[]): T[] {
      const kept = list.slice(0, left);
      left -= kept.length;
      return kept;
    },
  };
}
