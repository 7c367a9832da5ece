import { signStandardWebhook } from "../providers/standard-webhooks";
import { sendOutbound, type OutboundResult } from "./outbound";

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

export type ForwardResult = Exclude<OutboundResult, { kind: "delivered" }> | { kind: "delivered"; httpStatus: number };

export async function forward(request: ForwardRequest, signingSecret: string, now = Date.now()): Promise<ForwardResult> {
  const timestamp = Math.floor(now / 1000);
  const signature = await signStandardWebhook(signingSecret, request.receiptId, timestamp, request.body);
  const result = await sendOutbound(
    {
      url: request.url,
      body: request.body,
      timeoutMs: request.timeoutMs,
      idempotencyKey: request.receiptId,
      headers: {
        "content-type": request.contentType,
        "webhook-id": request.receiptId,
        "webhook-timestamp": String(timestamp),
        "webhook-signature": signature,
        "x-webhook-source": request.source,
        "x-webhook-event-key": request.eventKey,
        ...(request.eventType ? { "x-webhook-event-type": request.eventType } : {}),
      },
    },
    now,
  );
  if (result.kind !== "delivered") return result;
  // The backend's answer body is not ours to keep: it may echo the payload back.
  await result.response.body?.cancel();
  return { kind: "delivered", httpStatus: result.httpStatus };
}
