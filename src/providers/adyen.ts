import { decodeBase64, decodeHex, utf8Bytes } from "../crypto/encoding";
import { anySignatureVerifies } from "../crypto/verify";
import { batchItemAnnotations } from "./batch-items";
import { parseJsonBody, stringAtPath, timeAtPath, valueAtPath } from "./json";
import { annotationsFrom, eventKeyOf, MAX_VERIFICATION_STEPS, rejected } from "./signed";
import type { ProviderAdapter } from "./types";

/**
 * Adyen standard webhooks: each `notificationItems[].NotificationRequestItem` carries its own
 * `additionalData.hmacSignature`, base64 HMAC-SHA256 keyed by the hex HMAC key over
 * `pspReference:originalReference:merchantAccountCode:merchantReference:value:currency:eventCode:success`.
 * Every item must verify. One item is keyed `pspReference:eventCode:success` (Adyen's own duplicate rule); a
 * batch of several, by the payload's SHA-256 (a retry resends the same batch); every item's `pspReference` is kept
 * with the receipt (src/providers/batch-items.ts), so the audit finds the batch by any of them. Adyen wants
 * `[accepted]`.
 */
const MAX_ITEMS = 16;

function signingString(item: unknown): string {
  const field = (path: string) => {
    const value = valueAtPath(item, path);
    return value === undefined || value === null ? "" : String(value);
  };
  return [
    field("pspReference"),
    field("originalReference"),
    field("merchantAccountCode"),
    field("merchantReference"),
    field("amount.value"),
    field("amount.currency"),
    field("eventCode"),
    field("success"),
  ].join(":");
}

export const adyen: ProviderAdapter = {
  provider: "adyen",
  keptHeaders: ["content-type", "user-agent"],

  async verify(input) {
    if (input.secrets.length === 0) return rejected("no-usable-secret");
    const payload = parseJsonBody(input.rawBody);
    const wrapped = valueAtPath(payload, "notificationItems");
    if (!Array.isArray(wrapped) || wrapped.length === 0) return rejected("missing-signature");
    if (wrapped.length > MAX_ITEMS) return rejected("verification-over-budget");
    const items = wrapped.map((entry) => valueAtPath(entry, "NotificationRequestItem"));
    const keys = input.secrets.flatMap((secret) => {
      const material = decodeHex(secret.value);
      return material && material.length > 0 ? [{ algorithm: "hmac-sha256" as const, material }] : [];
    });
    if (items.length * keys.length > MAX_VERIFICATION_STEPS) return rejected("verification-over-budget");
    for (const item of items) {
      const signatureText = stringAtPath(item, "additionalData.hmacSignature");
      if (!signatureText) return rejected("missing-signature");
      const signature = decodeBase64(signatureText);
      if (!signature || signature.length === 0) return rejected("malformed-signature");
      let verified = false;
      for (const key of keys) if (await anySignatureVerifies(key, [signature], utf8Bytes(signingString(item)))) verified = true;
      if (!verified) return rejected("signature-mismatch");
    }
    const first = items[0];
    const single = items.length === 1 ? [stringAtPath(first, "pspReference"), stringAtPath(first, "eventCode"), stringAtPath(first, "success")] : [];
    const key = await eventKeyOf(single.length === 3 && single.every(Boolean) ? single.join(":") : null, input.rawBody);
    return {
      kind: "event",
      identity: {
        ...key,
        eventType: stringAtPath(first, "eventCode"),
        subjectId: stringAtPath(first, "pspReference"),
        version: null,
        occurredAt: timeAtPath(first, "eventDate"),
        annotations: {
          ...annotationsFrom({
            "merchant-reference": stringAtPath(first, "merchantReference"),
            "event-key-origin": key.eventKeyOrigin === "payload-sha256" ? "payload-sha256" : null,
          }),
          ...batchItemAnnotations(items.length, items.map((item) => stringAtPath(item, "pspReference"))),
        },
      },
      acknowledgement: { status: 200, text: "[accepted]" },
    };
  },
};
