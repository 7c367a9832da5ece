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
 * Stripe: `Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>…]`, HMAC-SHA256 over `${t}.${body}` keyed by the endpoint
 * secret exactly as shown (`whsec_…`, used as text). While a secret is rolled Stripe sends one `v1` per live
 * secret. The key is the event `id` in the body; `data.object.id` is kept as the subject, because Stripe can emit
 * two separate events (two ids) for one change of one object.
 */
export const stripe = signedAdapter({
  provider: "stripe",
  keptHeaders: ["content-type", "user-agent"],
  defaultToleranceSeconds: 300,

  read({ headers, rawBody }) {
    const header = readHeader(headers, "stripe-signature");
    if (!header) return "missing-signature";
    const entries = parseSignatureList(header, ",", "=");
    const timestampText = entries?.find(([name]) => name === "t")?.[1];
    const signedAt = parseUnixSeconds(timestampText);
    if (!entries || signedAt === null) return "malformed-signature";
    const candidates = entries.filter(([name]) => name === "v1").map(([, value]) => value);
    return {
      signatures: presentedSignatures(candidates, "hex", "hmac-sha256"),
      signedAt,
      signedContent: concatBytes(utf8Bytes(`${timestampText}.`), rawBody),
    };
  },

  keyFor: utf8Key("hmac-sha256"),

  async identify({ input, timestampAgeSeconds }) {
    const payload = parseJsonBody(input.rawBody);
    return event(
      {
        ...(await eventKeyOf(stringAtPath(payload, "id"), input.rawBody, { signed: true })),
        ...describePayload(payload, input.options, { type: "type", subject: "data.object.id", occurredAt: "created" }),
      },
      timestampAgeSeconds,
    );
  },
});
