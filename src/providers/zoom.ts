import { encodeHex, utf8Bytes } from "../crypto/encoding";
import { hmacSign } from "../crypto/hmac";
import { parseJsonBody, stringAtPath } from "./json";
import { describePayload, event, eventKeyOf, signedAdapter, utf8Key, v0TimestampedSignature } from "./signed";

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

  read: v0TimestampedSignature("x-zm-signature", "x-zm-request-timestamp"),

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
        ...describePayload(payload, input.options, {
          type: "event",
          subject: "payload.object.id",
          occurredAt: "event_ts",
        }),
      },
      timestampAgeSeconds,
    );
  },
});
