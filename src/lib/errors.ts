import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { logError } from "./log";

/**
 * One error envelope for every route: {"error": {"code": "...", "message": "..."}}. Handlers throw
 * `apiError(...)`; app.onError renders it. Messages are written for the caller and never echo input.
 */
export function apiError(status: ContentfulStatusCode, code: string, message: string, headers?: HeadersInit): HTTPException {
  const response = new Response(JSON.stringify({ error: { code, message } }), {
    status,
    headers: { "content-type": "application/json; charset=utf-8", ...Object.fromEntries(new Headers(headers)) },
  });
  return new HTTPException(status, { res: response, message: code });
}

export function renderError(error: Error, c: Context): Response {
  if (error instanceof HTTPException) return error.getResponse();
  logError("request.failed", error, { path: new URL(c.req.url).pathname, method: c.req.method });
  // Unexpected failures answer 500 with no detail; senders retry 5xx, so nothing is lost.
  return c.json({ error: { code: "internal_error", message: "Internal error; the delivery was not accepted." } }, 500);
}
