import type { Context } from "hono";
import { HTTPException } from "hono/http-exception";
import type { ContentfulStatusCode } from "hono/utils/http-status";
import { logError } from "./log";

/**
 * One error envelope for every route: {"error": {"code": "...", "message": "..."}}. Handlers throw an `ApiError`
 * (through `apiError(...)`), which carries its parts as data, in the style of Hono's HTTPException; the envelope is
 * rendered only when it is answered (app.onError, or Hono's own handler through `getResponse`), and the dashboard
 * reads `message` directly. Messages are written for the caller and never echo input.
 */
export class ApiError extends HTTPException {
  readonly code: string;
  readonly headers: Headers;

  constructor(status: ContentfulStatusCode, code: string, message: string, headers?: HeadersInit) {
    super(status, { message });
    this.name = "ApiError";
    this.code = code;
    this.headers = new Headers(headers);
  }

  /** The JSON envelope with this error's status and headers. */
  override getResponse(): Response {
    const headers = new Headers(this.headers);
    headers.set("content-type", "application/json; charset=utf-8");
    return new Response(JSON.stringify({ error: { code: this.code, message: this.message } }), {
      status: this.status,
      headers,
    });
  }
}

export function apiError(status: ContentfulStatusCode, code: string, message: string, headers?: HeadersInit): ApiError {
  return new ApiError(status, code, message, headers);
}

export function renderError(error: Error, c: Context): Response {
  if (error instanceof HTTPException) return error.getResponse();
  logError("request.failed", error, { path: new URL(c.req.url).pathname, method: c.req.method });
  // Unexpected failures answer 500 with no detail; senders retry 5xx, so nothing is lost.
  return c.json({ error: { code: "internal_error", message: "Internal error; the delivery was not accepted." } }, 500);
}
