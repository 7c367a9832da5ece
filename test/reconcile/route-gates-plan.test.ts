import { describe, expect, it } from "vitest";
import {
  FORGET_AFTER_ABSENT_RUNS,
  GATE_CALLS_PER_RUN,
  planRouteGates,
  ROUTE_GATE_WRITES_PER_RUN,
} from "../../src/reconcile/route-gates-plan";

/** The route-gates step's decisions (src/reconcile/route-gates-plan.ts), without storage: its bounds per run. */

const routes = (count: number, source = "s") =>
  Array.from({ length: count }, (_, index) => ({ source, route: `r${index}` }));

describe("the route-gates plan", () => {
  it("forgets a route only after it was absent in two runs in a row, and never one of a refused source", () => {
    expect(FORGET_AFTER_ABSENT_RUNS).toBe(2);
    const plan = planRouteGates({
      gated: [],
      refusedSources: new Set(["broken"]),
      known: [
        { source: "s", route: "first-miss", absentRuns: 0 },
        { source: "s", route: "second-miss", absentRuns: 1 },
        { source: "broken", route: "unknown", absentRuns: 1 },
      ],
      breakerAlerts: [],
    });
    expect(plan.absent).toEqual([{ source: "s", route: "first-miss", absentRuns: 0 }]);
    expect(plan.forget).toEqual([{ source: "s", route: "second-miss", absentRuns: 1, alertOpen: false }]);
  });

  it("is bounded per run however much the config changed: the rest waits for the next run", () => {
    const plan = planRouteGates({
      gated: routes(40, "new").map((route) => ({ ...route, breaker: false })),
      refusedSources: new Set(),
      known: [
        ...routes(30, "gone").map((route) => ({ ...route, absentRuns: 1 })),
        ...routes(30, "going").map((route) => ({ ...route, absentRuns: 0 })),
      ],
      breakerAlerts: routes(5, "new"),
    });
    expect(plan.forget.length + plan.closeBreaker.length).toBe(GATE_CALLS_PER_RUN);
    expect(plan.absent.length + plan.present.length + plan.register.length).toBe(ROUTE_GATE_WRITES_PER_RUN);
    // Stale routes go first: a live route's registration can wait a run.
    expect(plan.absent).toHaveLength(30);
    expect(plan.register).toHaveLength(ROUTE_GATE_WRITES_PER_RUN - 30);
  });
});
