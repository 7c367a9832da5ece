import { parseRetryAfter } from "../decide/retry-schedule";

/**
 * Every call that leaves the Worker with a side effect — a forward to the user's backend, or an external API
 * call from a handler — goes through here, so each one carries an idempotency key and is judged by one rule:
 * a destination that may have acted is never reported as a confident failure.
 */

export interface OutboundRequest {
  url: string;
  method?: string;
  headers: Record<string, string>;
  body?: Uint8Array | string | null;
  timeoutMs: number;
  /** Stable across every retry and replay of one receipt; sent as `Idempotency-Key`. */
  idempotencyKey: string;
}

export type OutboundResult =
  /** 2xx. The caller owns the response body (forward cancels it; handlers may read a remote id from it). */
  | { kind: "delivered"; httpStatus: number; response: Response }
  /** 408, 429, 5xx, or the connection failed: worth another try. */
  | { kind: "transient"; httpStatus: number | null; error: string; retryAfterSeconds: number | null }
  /** The request was sent and no answer came in time: it may have been applied. Retried with the same key. */
  | { kind: "unknown"; error: string }
  /** Any other status (4xx, 3xx): the destination refused this request; retrying will not change its mind. */
  | { kind: "permanent"; httpStatus: number; error: string };

export async function sendOutbound(request: OutboundRequest, now = Date.now()): Promise<OutboundResult> {
  let response: Response;
  try {
    response = await fetch(request.url, {
      method: request.method ?? "POST",
      body: request.body ?? null,
      redirect: "manual",
      signal: AbortSignal.timeout(request.timeoutMs),
      headers: { ...request.headers, "idempotency-key": request.idempotencyKey },
    });
  } catch (error) {
    const name = error instanceof Error ? error.name : "";
    if (name === "TimeoutError" || name === "AbortError") {
      return {
        kind: "unknown",
        error: `no answer within ${request.timeoutMs} ms; the destination may have applied it`,
      };
    }
    return {
      kind: "transient",
      httpStatus: null,
      error: `connection failed: ${errorText(error)}`,
      retryAfterSeconds: null,
    };
  }
  const status = response.status;
  if (statusVerdict(status) === "delivered") return { kind: "delivered", httpStatus: status, response };
  // Error bodies are never read into a record: they may echo the payload back.
  await response.body?.cancel();
  if (statusVerdict(status) === "transient") {
    return {
      kind: "transient",
      httpStatus: status,
      error: `destination answered ${status}`,
      retryAfterSeconds: parseRetryAfter(response.headers.get("retry-after"), now),
    };
  }
  return { kind: "permanent", httpStatus: status, error: `destination answered ${status}` };
}

/** What a destination's HTTP status says of the delivery: 2xx took it; 408, 429 and 5xx may take it later; the rest refuse it. Pure. */
export function statusVerdict(status: number): "delivered" | "transient" | "permanent" {
  if (status >= 200 && status < 300) return "delivered";
  if (status === 408 || status === 429 || status >= 500) return "transient";
  return "permanent";
}

function errorText(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).slice(0, 200);
}
