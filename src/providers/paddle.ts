import { concatBytes, utf8Bytes } from "../crypto/encoding";
import { parseJsonBody, stringAtPath } from "./json";
import {
  describePayload,
  event,
  eventKeyOf,
  parseSignatureList,
  parseUnixSeconds,
  presentedSignatures,
  readHeader,
  signedAdapter,
  utf8Key,
} from "./signed";

/**
 * Paddle Billing: `Paddle-Signature: ts=<unix>;h1=<hex>[;h1=<hex>…]`, HMAC-SHA256 over `${ts}:${body}` keyed by the
 * notification destination's secret key (`pdl_ntfset_…`, as text). Several `h1` arrive while a secret is rotated.
 * The key is the payload's `event_id`.
 */
export const paddle = signedAdapter({
  provider: "paddle",
  keptHeaders: ["content-type", "user-agent"],
  defaultToleranceSeconds: 300,

  read({ headers, rawBody }) {
    const header = readHeader(headers, "paddle-signature");
    if (!header) return "missing-signature";
    const entries = parseSignatureList(header, ";", "=");
    const timestampText = entries?.find(([name]) => name === "ts")?.[1];
    const signedAt = parseUnixSeconds(timestampText);
    if (!entries || signedAt === null) return "malformed-signature";
    return {
      signatures: presentedSignatures(
        entries.filter(([name]) => name === "h1").map(([, value]) => value),
        "hex",
        "hmac-sha256",
      ),
      signedAt,
      signedContent: concatBytes(utf8Bytes(`${timestampText}:`), rawBody),
    };
  },

  keyFor: utf8Key("hmac-sha256"),

  async identify({ input, timestampAgeSeconds }) {
    const payload = parseJsonBody(input.rawBody);
    return event(
      {
        ...(await eventKeyOf(stringAtPath(payload, "event_id"), input.rawBody, { signed: true })),
        ...describePayload(payload, input.options, {
          type: "event_type",
          subject: "data.id",
          occurredAt: "occurred_at",
        }),
      },
      timestampAgeSeconds,
    );
  },
});
