import { Hono } from "hono";
import { apiError } from "../../lib/errors";
import type { AdminEnv } from "../guards/auth";
import { testRoutes } from "../route-test/route-test";
import { parseRouteTestRequest } from "../route-test/route-test-request";

/**
 * POST /admin/api/sources/:source/route-test — the source's newest stored events through its routes, now's or a
 * draft's, counted per route (../route-test/route-test.ts). A read: nothing is sent, enqueued or written, so it is
 * as safe to run against production as a search is. Mounted behind requireBearer by ./index.ts.
 */
export const routeTestApi = new Hono<AdminEnv>();

routeTestApi.post("/:source/route-test", async (c) => {
  let body: unknown;
  try {
    body = await c.req.json();
  } catch {
    throw apiError(400, "invalid_body", 'Send a JSON object: {"last": n, "route"?, "draft"?}.');
  }
  const source = c.req.param("source");
  return c.json(await testRoutes(c.env, source, parseRouteTestRequest(source, body)));
});
