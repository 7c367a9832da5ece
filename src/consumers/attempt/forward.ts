import { signStandardWebhook } from "../../providers/standard-webhooks";
import { type OutboundResult, sendOutbound } from "./outbound";

/**
 * HTTP forward to the user's backend, signed with the Standard Webhooks scheme under the gateway secret.
 * `webhook-id` and `Idempotency-Key` are the delivery's id — the receipt id, or for a source with several routes
 * `<receipt id>:<route>` (two routes may forward to one backend) — stable across our retries and replays, so the
 * backend can dedupe whatever we resend.
 */

export interface ForwardRequest {
  url: string;
  timeoutMs: number;
  /** The receipt id, or `<receipt id>:<route>` for a route of a source with several. */
  deliveryId: string;
  source: string;
  eventKey: string;
  eventType: string | null;
  body: Uint8Array;
  contentType: string;
  /** The route's own headers (src/routing/): never one of the headers set below, which config refuses. */
  routeHeaders?: Record<string, string> | null;
}

export type ForwardResult = Exclude<OutboundResult, { kind: "delivered" }> | { kind: "delivered"; httpStatus: number };

/** Printable ASCII, no leading or trailing space: what every HTTP stack passes through unchanged as a header value. */
const PLAIN_HEADER_VALUE = /^[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?$/;

/**
 * A sender-chosen value (an event key, a type read by `type_path`) as a header. Most are plain ASCII and go as
 * they are; one holding a newline, an emoji or other non-ASCII text would make fetch throw, and the delivery
 * would retry until dead. Such a value goes percent-encoded (UTF-8) under `<name>-encoded` instead, so a backend
 * never mistakes an encoded value for a plain one; the body, which the signature covers, still has the original.
 */
export function eventHeader(name: string, value: string): Record<string, string> {
  return PLAIN_HEADER_VALUE.test(value) ? { [name]: value } : { [`${name}-encoded`]: encodeURIComponent(value) };
}

/**
 * The headers a forward carries: the route's own, then the Standard Webhooks signature under the gateway secret and
 * the event's names. A listener (src/listen/) gets the same, so a local server verifies what a deployed one would.
 */
export async function forwardHeaders(
  request: Omit<ForwardRequest, "url" | "timeoutMs">,
  signingSecret: string,
  now: number,
): Promise<Record<string, string>> {
  const timestamp = Math.floor(now / 1000);
  const signature = await signStandardWebhook(signingSecret, request.deliveryId, timestamp, request.body);
  return {
    ...request.routeHeaders,
    "content-type": request.contentType,
    "webhook-id": request.deliveryId,
    "webhook-timestamp": String(timestamp),
    "webhook-signature": signature,
    "x-webhook-source": request.source,
    ...eventHeader("x-webhook-event-key", request.eventKey),
    ...(request.eventType ? eventHeader("x-webhook-event-type", request.eventType) : {}),
  };
}

export async function forward(
  request: ForwardRequest,
  signingSecret: string,
  now = Date.now(),
): Promise<ForwardResult> {
  const result = await sendOutbound(
    {
      url: request.url,
      body: request.body,
      timeoutMs: request.timeoutMs,
      idempotencyKey: request.deliveryId,
      headers: await forwardHeaders(request, signingSecret, now),
    },
    now,
  );
  if (result.kind !== "delivered") return result;
  // The backend's answer body is not ours to keep: it may echo the payload back.
  await result.response.body?.cancel();
  return { kind: "delivered", httpStatus: result.httpStatus };
}
