import { Hono } from "hono";
import { pauseRoute, resumeRoute, routeControlView } from "../actions/route-control";
import type { AdminEnv } from "../guards/auth";

/**
 * /admin/api/sources/:source/routes/:route — a route's delivery control: its gate's state (paused, circuit breaker,
 * deliveries in flight and held), and pause / resume. Mounted behind requireBearer by ./index.ts.
 */
export const routeControlApi = new Hono<AdminEnv>();

routeControlApi.get("/:source/routes/:route", async (c) =>
  c.json(await routeControlView(c.env, c.req.param("source"), c.req.param("route"))),
);

routeControlApi.post("/:source/routes/:route/:change{pause|resume}", async (c) => {
  const { source, route, change } = c.req.param();
  return c.json(change === "pause" ? await pauseRoute(c.env, source, route) : await resumeRoute(c.env, source, route));
});
