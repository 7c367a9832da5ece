import type { Acknowledgement } from "../providers/types";

interface Claimed {
  disposition: string;
  receiptId: string;
}

/**
 * The 2xx for a delivery whose claims are all durable. By default the receiver's own {"status", "receipt"} (for a
 * delivery of several events, {"events": [{"status", "receipt"}, …]} in their order); a sender that reads the
 * answer gets the shape its adapter asked for (JSON, a text body such as Adyen's `[accepted]` or Twilio's TwiML,
 * or a bare status), with the receipts and dispositions moved to headers, comma-separated in the events' order, so
 * operators can still correlate them.
 */
export function acknowledge(claims: readonly Claimed[], shaped: Acknowledgement | undefined): Response {
  const answers = claims.map((claimed) => ({ status: claimed.disposition, receipt: claimed.receiptId }));
  if (!shaped) return Response.json(answers.length === 1 ? answers[0] : { events: answers });
  const headers = {
    "x-webhook-receipt": claims.map((claimed) => claimed.receiptId).join(", "),
    "x-webhook-disposition": claims.map((claimed) => claimed.disposition).join(", "),
  };
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
