import { type Context, Hono } from "hono";
import { recordAllowed, requireRole } from "../access/require-role";
import { pauseRoute, resumeRoute, routeControlView } from "../actions/route-control";
import { routeTarget } from "../audit-log/targets";
import type { AdminEnv } from "../guards/auth";

/**
 * /admin/api/sources/:source/routes/:route — a route's delivery control: its gate's state (paused, circuit breaker,
 * deliveries in flight and held), and pause / resume. Mounted behind the sign-in by
 * ./index.ts; pausing and resuming need the operator role, and each is written to the audit log.
 */
export const routeControlApi = new Hono<AdminEnv>();

routeControlApi.get("/:source/routes/:route", async (c) =>
  c.json(await routeControlView(c.env, c.req.param("source"), c.req.param("route"))),
);

const routeChange = (c: Context<AdminEnv>) => c.req.param("change") as "pause" | "resume";

routeControlApi.post(
  "/:source/routes/:route/:change{pause|resume}",
  requireRole("operator", routeChange),
  async (c) => {
    const { source, route } = c.req.param();
    const change = routeChange(c);
    const record = (affected: number) => recordAllowed(c, change, routeTarget(source, route), affected);
    if (change === "pause") {
      const view = await pauseRoute(c.env, source, route);
      // A pause holds the one route.
      await record(1);
      return c.json(view);
    }
    const view = await resumeRoute(c.env, source, route);
    // A resume sends on what the route held.
    await record(view.resumed);
    return c.json(view);
  },
);
