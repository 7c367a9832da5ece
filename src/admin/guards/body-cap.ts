import type { MiddlewareHandler } from "hono";
import { readBodyWithCap } from "../../ingest/read-body";
import { apiError } from "../../lib/errors";
import type { AdminEnv } from "./auth";

/**
 * The largest admin request body. The biggest legitimate one is the dashboard's dead-letter form with a full page
 * (200 rows) ticked, about 8 KB; every API body is a short JSON object. The login form is read before the token
 * in it is known good, so without a cap anyone could make the Worker buffer and parse megabytes.
 */
export const ADMIN_MAX_BODY_BYTES = 16 * 1024;
/** Past the cap, how much more is read and dropped so the 413 reaches the client; no admin client comes near. */
export const ADMIN_OVER_CAP_DRAIN_BYTES = 1024 * 1024;

/**
 * Reads every admin request body through the ingest path's streaming cap before any handler (or the login form's
 * parser) sees it, declared Content-Length or chunked alike, then hands handlers the buffered bytes.
 */
export const capAdminBody: MiddlewareHandler<AdminEnv> = async (c, next) => {
  if (!c.req.raw.body) return next();
  const body = await readBodyWithCap(c.req.raw, ADMIN_MAX_BODY_BYTES, ADMIN_OVER_CAP_DRAIN_BYTES);
  if (body === "too-large")
    throw apiError(413, "payload_too_large", `Admin request bodies are limited to ${ADMIN_MAX_BODY_BYTES} bytes.`);
  if (body === "unreadable") throw apiError(400, "body_unreadable", "The request body could not be read to its end.");
  c.req.raw = new Request(c.req.raw, { body });
  await next();
};
