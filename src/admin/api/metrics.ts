import { Hono } from "hono";
import type { AdminEnv } from "../guards/auth";
import { OPENMETRICS_CONTENT_TYPE, renderOpenMetrics } from "../metrics/openmetrics";
import { metricFamilies } from "../metrics/scrape";
import { parseWindow } from "../receipts/filters";

/**
 * /admin/api/metrics — the numbers the platform cannot export over OTLP, in OpenMetrics text for Prometheus or
 * Grafana Agent to scrape with the admin bearer token (../metrics/scrape.ts says what each costs). Mounted behind
 * requireBearer by ./index.ts.
 */
export const metricsApi = new Hono<AdminEnv>();

metricsApi.get("/", async (c) => {
  const families = await metricFamilies(c.env, parseWindow(c.req.query()));
  return c.body(renderOpenMetrics(families), 200, { "content-type": OPENMETRICS_CONTENT_TYPE });
});
