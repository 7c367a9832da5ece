import { Hono } from "hono";
import { admin } from "./admin";
import { webhooks } from "./ingest/route";
import { apiError, renderError } from "./lib/errors";
import { sourcesHealth } from "./sources/registry";

export const app = new Hono<{ Bindings: Env }>();

/**
 * Up, and which sources cannot accept deliveries. Names only: this route is unauthenticated, and the problems
 * quote configuration, so the why is behind the admin token (GET /admin/api/sources). Still 200 when degraded:
 * the Worker is serving every other source.
 */
app.get("/health", (c) => {
  const health = sourcesHealth(c.env);
  const invalidSources = health.unreadable ? ["*"] : Object.keys(health.invalid);
  if (invalidSources.length === 0) return c.json({ status: "ok" });
  return c.json({ status: "degraded", invalidSources, detail: "GET /admin/api/sources names each problem." });
});
app.route("/webhooks", webhooks);
app.route("/admin", admin);
app.notFound(() => {
  throw apiError(404, "not_found", "No such route.");
});
app.onError(renderError);
