import { Hono } from "hono";
import { apiError } from "../../lib/errors";
import { lookupSource } from "../../sources/registry";
import type { AdminEnv } from "../guards/auth";
import { verificationReport } from "../health/verification-report";
import { parseWindow } from "../receipts/filters";

/**
 * GET /admin/api/sources/:source — one configured source: its provider and its verification health (which secret
 * verified its deliveries, when each last did, whether an older one can go, and its rejections by reason per hour;
 * docs/operating.md, "Verification health"). `?window=` as for /stats (24 h by default). Mounted behind
 * requireBearer by ./index.ts.
 */
export const sourceDetailApi = new Hono<AdminEnv>();

sourceDetailApi.get("/:source", async (c) => {
  const name = c.req.param("source");
  const windowMs = parseWindow(c.req.query());
  const lookup = lookupSource(c.env, name);
  if (lookup.kind === "unknown")
    throw apiError(404, "unknown_source", "No webhook source is configured under this name.");
  if (lookup.kind === "invalid")
    throw apiError(
      409,
      "source_config_invalid",
      `This source's configuration is invalid: ${lookup.problems.join("; ")}`,
    );
  const { source } = lookup;
  return c.json({
    source: source.name,
    provider: source.provider,
    verification: await verificationReport(c.env, source, windowMs),
  });
});
