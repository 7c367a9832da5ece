import { signStandardWebhook } from "../providers/standard-webhooks";
import { parseRetryAfter } from "./retry-schedule";

/**
 * HTTP forward to the user's backend, signed with the Standard Webhooks scheme under the gateway secret.
 * `webhook-id` and `Idempotency-Key` are the receipt id — stable across our retries and replays — so the
 * backend can dedupe whatever we resend.
 */

export interface ForwardRequest {
  url: string;
  timeoutMs: number;
  receiptId: string;
  source: string;
  eventKey: string;
  eventType: string | null;
  body: Uint8Array;
  contentType: string;
}

export type ForwardResult =
  | { kind: "delivered"; httpStatus: number }
  /** 408, 429, 5xx and connection errors: worth another try. */
  | { kind: "transient"; httpStatus: number | null; error: string; retryAfterSeconds: number | null }
  /** The request may have arrived: we cannot know. Retried with the same key, never reported as failed. */
  | { kind: "unknown"; error: string }
  /** Any other 4xx (and 3xx): the backend refused this event; retrying will not change its mind. */
  | { kind: "permanent"; httpStatus: number; error: string };

export async function forward(request: ForwardRequest, signingSecret: string, now = Date.now()): Promise<ForwardResult> {
  const timestamp = Math.floor(now / 1000);
  const signature = await signStandardWebhook(signingSecret, request.receiptId, timestamp, request.body);
  let response: Response;
  try {
    response = await fetch(request.url, {
      method: "POST",
      body: request.body,
      redirect: "manual",
      signal: AbortSignal.timeout(request.timeoutMs),
      headers: {
        "content-type": request.contentType,
        "webhook-id": request.receiptId,
        "webhook-timestamp": String(timestamp),
        "webhook-signature": signature,
        "idempotency-key": request.receiptId,
        "x-webhook-source": request.source,
        "x-webhook-event-key": request.eventKey,
        ...(request.eventType ? { "x-webhook-event-type": request.eventType } : {}),
      },
    });
  } catch (error) {
    const name = error instanceof Error ? error.name : "";
    if (name === "TimeoutError" || name === "AbortError") {
      return { kind: "unknown", error: `no answer within ${request.timeoutMs} ms` };
    }
    return { kind: "transient", httpStatus: null, error: `connection failed: ${error instanceof Error ? error.message : String(error)}`, retryAfterSeconds: null };
  }
  // The body is not read into any record: it may echo the payload back.
  await response.body?.cancel();
  const status = response.status;
  if (status >= 200 && status < 300) return { kind: "delivered", httpStatus: status };
  if (status === 408 || status === 429 || status >= 500) {
    return {
      kind: "transient",
      httpStatus: status,
      error: `destination answered ${status}`,
      retryAfterSeconds: parseRetryAfter(response.headers.get("retry-after"), now),
    };
  }
  return { kind: "permanent", httpStatus: status, error: `destination answered ${status}` };
}
