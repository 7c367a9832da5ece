import { concatBytes, decodeBase64, utf8Bytes } from "../crypto/encoding";
import { batchItemAnnotations } from "./batch-items";
import { parseJsonBody } from "./json";
import { event, eventKeyOf, parseUnixSeconds, presentedSignatures, readHeader, signedAdapter } from "./signed";

/**
 * SendGrid Event Webhook (signed): `X-Twilio-Email-Event-Webhook-Signature` is a base64, DER-encoded ECDSA P-256
 * SHA-256 signature over `X-Twilio-Email-Event-Webhook-Timestamp` ‖ body; the source lists the verification key
 * SendGrid shows (base64 DER public key, PEM armour allowed). One delivery is a batch of events, so the key is the
 * payload's SHA-256: a retry of the batch resends the same bytes. Each event's `sg_event_id` is kept with the
 * receipt (src/providers/batch-items.ts), so the audit finds the delivery by any of them.
 */
function publicKeyBytes(secret: string) {
  return decodeBase64(secret.replace(/-----(BEGIN|END) PUBLIC KEY-----/g, "").replace(/\s+/g, ""));
}

export const sendgrid = signedAdapter({
  provider: "sendgrid",
  keptHeaders: ["x-twilio-email-event-webhook-timestamp", "content-type", "user-agent"],
  defaultToleranceSeconds: 300,

  read({ headers, rawBody }) {
    const signature = readHeader(headers, "x-twilio-email-event-webhook-signature");
    const timestampText = readHeader(headers, "x-twilio-email-event-webhook-timestamp");
    if (!signature || !timestampText) return "missing-signature";
    const signedAt = parseUnixSeconds(timestampText);
    if (signedAt === null) return "malformed-signature";
    return {
      signatures: presentedSignatures([signature], "base64", "ecdsa-p256-sha256"),
      signedAt,
      signedContent: concatBytes(utf8Bytes(timestampText), rawBody),
    };
  },

  keyFor(secret) {
    const material = publicKeyBytes(secret);
    return material && material.length > 0 ? { algorithm: "ecdsa-p256-sha256", material } : null;
  },

  async identify({ input, timestampAgeSeconds }) {
    const payload = parseJsonBody(input.rawBody);
    const items = Array.isArray(payload) ? payload : [];
    const itemIds = items.map((item) =>
      item && typeof item === "object" ? (item as Record<string, unknown>).sg_event_id : undefined,
    );
    return event(
      {
        ...(await eventKeyOf(null, input.rawBody)),
        eventType: "event-batch",
        subjectId: null,
        version: null,
        occurredAt: null,
        annotations: batchItemAnnotations(items.length, itemIds),
      },
      timestampAgeSeconds,
    );
  },
});
