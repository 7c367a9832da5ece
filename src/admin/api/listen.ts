import { Hono } from "hono";
import { apiError } from "../../lib/errors";
import { listenHub } from "../../listen/client";
import type { SourceConfig } from "../../sources/config";
import { requireRole } from "../access/require-role";
import { configuredSource, namedRoute } from "../actions/route-control";
import type { AdminEnv } from "../guards/auth";

/**
 * GET /admin/api/listen/:source[?route=R] — `npm run cli -- listen`'s WebSocket (docs/cli.md, "`listen <source> [--route R] --forward URL`"). Mounted behind
 * requireBearer by ./index.ts, so a listener holds the admin token like any other admin client (a browser cannot
 * set the header, so no page can open one with the operator's cookie). The upgrade goes to the hub of the route's
 * `listen:<name>` destination (src/listen/hub.ts), which confirms the connection itself.
 */
export const listenApi = new Hono<AdminEnv>();

// A listener's answers mark deliveries processed, so listening is an operator's action, like a replay; the CLI's
// first plain GET is refused the same way, so a viewer reads one clear line rather than a socket that never opens.
listenApi.get("/:source", requireRole("operator", "listen"), async (c) => {
  const source = configuredSource(c.env, c.req.param("source"));
  const { routeName, listenName } = listenRoute(source, c.req.query("route"));
  // Without an upgrade, what a listener would reach: the CLI asks first, so a refused token or a route that is not
  // listen: is one clear line rather than a WebSocket that never opens.
  if (c.req.header("upgrade")?.toLowerCase() !== "websocket")
    return c.json({ source: source.name, route: routeName, listen: listenName });
  const headers = new Headers(c.req.raw.headers);
  headers.set("x-listen-name", listenName);
  headers.set("x-listen-source", source.name);
  headers.set("x-listen-route", routeName);
  return listenHub(c.env, listenName).fetch(new Request(c.req.raw, { headers }));
});

/** The route to listen on: the one named, or the source's only `listen:` route; else the 4xx saying which to pick. */
export function listenRoute(
  source: SourceConfig,
  routeName: string | undefined,
): { routeName: string; listenName: string } {
  const listening = source.routes.filter(({ destination }) => destination.kind === "listen");
  const route = routeName === undefined ? listening[0] : namedRoute(source, routeName);
  if (routeName === undefined && listening.length > 1)
    throw apiError(
      400,
      "route_required",
      `Source ${source.name} has several listen: routes (${listening.map(({ rules }) => rules.name).join(", ")}); pick one with --route.`,
    );
  if (!route || route.destination.kind !== "listen")
    throw apiError(
      409,
      "not_a_listen_route",
      `${routeName === undefined ? `Source ${source.name} has no route` : `Route ${routeName} is not one`} whose destination is listen:<name>; set destination = "listen:<name>" on the route to listen on it.`,
    );
  return { routeName: route.rules.name, listenName: route.destination.listenName };
}
