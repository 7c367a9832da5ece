import { Hono } from "hono";
import { admin } from "./admin";
import { adminTokenProblem } from "./admin/guards/auth";
import { relaySettings } from "./claims/relay-settings";
import { webhooks } from "./ingest/route";
import { apiError, renderError } from "./lib/errors";
import { healthAnswer, openSystemAlertKinds } from "./monitor/health-answer";
import { sourcesHealth } from "./sources/registry";
import { sourcesMissingSecrets, sourcesWithExpiredSecrets } from "./sources/secrets-set";

export const app = new Hono<{ Bindings: Env }>();

/**
 * Up, which sources cannot accept deliveries (a broken table, a secret not set, or every secret expired), whether a
 * relay setting is refused (src/claims/relay-settings.ts), and which system alerts are open (D1 unreachable, a failing relay,
 * a failed cron run, storage near a cap), read from the system monitor, never from D1. Names only: this route is
 * unauthenticated, and the problems quote configuration, so the why is behind the admin token
 * (GET /admin/api/health, GET /admin/api/sources). Still 200 when degraded: the Worker is serving what it can.
 */
app.get("/health", async (c) => {
  const health = sourcesHealth(c.env);
  const invalidSources = health.unreadable ? ["*"] : Object.keys(health.invalid);
  const now = Date.now();
  const missingSecrets = [...sourcesMissingSecrets(c.env, now).keys()];
  const expiredSecrets = [...sourcesWithExpiredSecrets(c.env, now).keys()];
  const adminTokenIsExample = adminTokenProblem(c.env) === "shipped-example";
  const relaySettingsRefused = relaySettings(c.env).problems.length > 0;
  return c.json(
    healthAnswer(invalidSources, await openSystemAlertKinds(c.env), {
      missingSecrets,
      expiredSecrets,
      adminTokenIsExample,
      relaySettingsRefused,
    }),
  );
});
app.route("/webhooks", webhooks);
app.route("/admin", admin);
app.notFound(() => {
  throw apiError(404, "not_found", "No such route.");
});
app.onError(renderError);
