import type { Acknowledgement } from "../providers/types";

/**
 * The 2xx for a delivery whose claim is durable. By default the receiver's own {"status", "receipt"}; a sender
 * that reads the answer gets the shape its adapter asked for (JSON, a text body such as Adyen's `[accepted]` or
 * Twilio's TwiML, or a bare status), with the receipt and disposition moved to headers so operators can still
 * correlate it.
 */
export function acknowledge(
  claimed: { disposition: string; receiptId: string },
  shaped: Acknowledgement | undefined,
): Response {
  if (!shaped) return Response.json({ status: claimed.disposition, receipt: claimed.receiptId });
  const headers = { "x-webhook-receipt": claimed.receiptId, "x-webhook-disposition": claimed.disposition };
  if (shaped.status === 204) return new Response(null, { status: 204, headers });
  if (shaped.json !== undefined) return Response.json(shaped.json, { status: shaped.status, headers });
  if (shaped.text !== undefined) {
    return new Response(shaped.text, {
      status: shaped.status,
      headers: { ...headers, "content-type": shaped.contentType ?? "text/plain; charset=utf-8" },
    });
  }
  return new Response(null, { status: shaped.status, headers });
}
