import type { MiddlewareHandler } from "hono";
import { apiError } from "../../lib/errors";
import type { AdminEnv } from "./auth";

/**
 * Defence in depth behind the session cookie's SameSite=Strict and the bearer token: a method that changes
 * something (POST, PUT, PATCH, DELETE) anywhere under /admin is refused 403 when a browser says it comes from
 * another site. hono's csrf() on the dashboard looks only at form content types, so a cross-origin JSON POST
 * used to reach /admin/dead/action; this looks at every unsafe request, whatever its body.
 *
 * `Sec-Fetch-Site` is the browser's own verdict, so when present it decides: only "same-origin" (the dashboard's
 * forms) and "none" (the operator's own action, never a page's) pass. Without it (an older browser), `Origin`
 * must be the request's own origin. Without either, the request is not a browser's page acting on the operator's
 * behalf (the CLI, curl, a script with the bearer token) and passes to the other guards.
 */

const UNSAFE_METHODS = new Set(["POST", "PUT", "PATCH", "DELETE"]);
const TRUSTED_FETCH_SITES = new Set(["same-origin", "none"]);

export function isCrossSiteRequest(method: string, headers: Headers, requestUrl: string): boolean {
  if (!UNSAFE_METHODS.has(method.toUpperCase())) return false;
  const fetchSite = headers.get("sec-fetch-site");
  if (fetchSite !== null) return !TRUSTED_FETCH_SITES.has(fetchSite.toLowerCase());
  const origin = headers.get("origin");
  return origin !== null && origin !== new URL(requestUrl).origin;
}

export const refuseCrossSite: MiddlewareHandler<AdminEnv> = async (c, next) => {
  if (isCrossSiteRequest(c.req.method, c.req.raw.headers, c.req.url))
    throw apiError(
      403,
      "cross_site_request",
      "Admin changes are accepted only from the admin's own pages or without a browser.",
    );
  await next();
};
