import { sha256Hex } from "../crypto/digest";
import { utf8Bytes } from "../crypto/encoding";
import { bytesEqualConstantTime } from "../crypto/hmac";
import { parseJsonBody } from "./json";
import { readHs256Jwt } from "./jwt";
import {
  DEFAULT_TOLERANCE_SECONDS,
  describePayload,
  event,
  eventKeyOf,
  readHeader,
  signedAdapter,
  toleranceSeconds,
  utf8Key,
} from "./signed";

/**
 * Netlify: `X-Webhook-Signature` is a JWS (HS256, the shared JWT scheme) keyed by the notification's JWS secret,
 * whose claims are `iss: "netlify"` and `sha256`: the hex SHA-256 of the body, which is checked too. Netlify sends
 * no delivery id and one deploy emits several notifications, so the key is the payload's SHA-256.
 */
export const netlify = signedAdapter({
  provider: "netlify",
  keptHeaders: ["x-netlify-event", "content-type", "user-agent"],
  async read({ headers, rawBody, now, options }) {
    const token = readHeader(headers, "x-webhook-signature");
    if (!token) return "missing-signature";
    // Netlify's tokens carry `iss` and the body's `sha256`, no `exp`: requiring one would refuse every delivery.
    const read = readHs256Jwt(token, now, toleranceSeconds(options, DEFAULT_TOLERANCE_SECONDS), {
      expiryRequired: false,
    });
    if (typeof read === "string") return read;
    if (read.claims.iss !== "netlify" || typeof read.claims.sha256 !== "string") return "malformed-signature";
    // The body hash is part of what the JWS signs; a body that does not match it is a changed body.
    if (!(await bytesEqualConstantTime(utf8Bytes(read.claims.sha256), utf8Bytes(await sha256Hex(rawBody)))))
      return "signature-mismatch";
    return read.presented;
  },
  keyFor: utf8Key("hmac-sha256"),
  async identify({ input }) {
    const payload = parseJsonBody(input.rawBody);
    const described = describePayload(payload, input.options, { subject: "id", occurredAt: "updated_at" });
    return event({
      ...(await eventKeyOf(null, input.rawBody)),
      ...described,
      eventType: described.eventType ?? readHeader(input.headers, "x-netlify-event"),
    });
  },
});
