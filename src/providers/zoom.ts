import { concatBytes, encodeHex, utf8Bytes } from "../crypto/encoding";
import { hmacSign } from "../crypto/hmac";
import { parseJsonBody, stringAtPath } from "./json";
import { describePayload, event, eventKeyOf, parseUnixSeconds, presentedSignatures, readHeader, signedAdapter, utf8Key } from "./signed";

/**
 * Zoom: `x-zm-signature: v0=<hex>`, HMAC-SHA256 over `v0:${x-zm-request-timestamp}:${body}` keyed by the app's
 * secret token. `endpoint.url_validation` is answered, once verified, with the plain token and its HMAC-SHA256
 * under the secret that verified it. Zoom sends no event id, so the key is the payload's SHA-256 (a retry resends
 * the same bytes; `event_ts` inside makes distinct events distinct).
 */
export const zoom = signedAdapter({
  provider: "zoom",
  keptHeaders: ["x-zm-request-timestamp", "x-zm-trackingid", "content-type", "user-agent"],
  defaultToleranceSeconds: 300,

  read({ headers, rawBody }) {
    const signature = readHeader(headers, "x-zm-signature");
    const timestampText = readHeader(headers, "x-zm-request-timestamp");
    if (!signature || !timestampText) return "missing-signature";
    const signedAt = parseUnixSeconds(timestampText);
    if (signedAt === null || !signature.startsWith("v0=")) return "malformed-signature";
    return {
      signatures: presentedSignatures([signature.slice(3)], "hex", "hmac-sha256"),
      signedAt,
      signedContent: concatBytes(utf8Bytes(`v0:${timestampText}:`), rawBody),
    };
  },

  keyFor: utf8Key("hmac-sha256"),

  async identify({ input, secret, timestampAgeSeconds }) {
    const payload = parseJsonBody(input.rawBody);
    if (stringAtPath(payload, "event") === "endpoint.url_validation") {
      const plainToken = stringAtPath(payload, "payload.plainToken");
      if (!plainToken || plainToken.length > 512) return { kind: "rejected", reason: "malformed-payload" };
      const encryptedToken = encodeHex(await hmacSign("SHA-256", utf8Bytes(secret.value), utf8Bytes(plainToken)));
      return { kind: "handshake", response: Response.json({ plainToken, encryptedToken }) };
    }
    return event(
      {
        ...(await eventKeyOf(null, input.rawBody)),
        ...describePayload(payload, input.options, { type: "event", subject: "payload.object.id", occurredAt: "event_ts" }),
      },
      timestampAgeSeconds,
    );
  },
});
