import { sha256Hex } from "../crypto/digest";
import { decodeBase64, decodeHex, utf8Bytes } from "../crypto/encoding";
import { anySignatureVerifies } from "../crypto/verify";
import { batchItemAnnotations } from "./batch-items";
import { stringAtPath, timeAtPath, valueAtPath } from "./json";
import { annotationsFrom, MAX_VERIFICATION_STEPS, rejected } from "./signed";
import type { ProviderAdapter } from "./types";
import { parseUnverifiedJson } from "./unverified";

/**
 * Adyen standard webhooks: each `notificationItems[].NotificationRequestItem` carries its own
 * `additionalData.hmacSignature`, base64 HMAC-SHA256 keyed by the hex HMAC key over
 * `pspReference:originalReference:merchantAccountCode:merchantReference:value:currency:eventCode:success`.
 * Every item must verify. Each item's key is `pspReference:eventCode:success` (Adyen's own duplicate rule), all
 * three inside what the item signs. One item is keyed by its key; a batch of several by the SHA-256 of its items'
 * keys, sorted: Adyen signs no timestamp and nothing around the items, so a key over the batch's bytes would make a
 * re-indented or reordered copy of a captured batch a new event. A batch that holds one item twice is refused for
 * the same reason. Every item's `pspReference` is kept with the receipt (src/providers/batch-items.ts), so the
 * audit finds the batch by any of them. Adyen wants `[accepted]`.
 */
const MAX_ITEMS = 16;

/** A field as the signing string spells it: absent or null is empty, anything else its string form. */
function field(item: unknown, path: string): string {
  const value = valueAtPath(item, path);
  return value === undefined || value === null ? "" : String(value);
}

function signingString(item: unknown): string {
  return [
    "pspReference",
    "originalReference",
    "merchantAccountCode",
    "merchantReference",
    "amount.value",
    "amount.currency",
    "eventCode",
    "success",
  ]
    .map((path) => field(item, path))
    .join(":");
}

/** `pspReference:eventCode:success`, every part signed; null when one is missing (Adyen always sends all three). */
function itemKey(item: unknown): string | null {
  const parts = ["pspReference", "eventCode", "success"].map((path) => field(item, path));
  return parts.every((part) => part.length > 0) ? parts.join(":") : null;
}

/** The delivery's key from its items' keys alone; null when an item has none or two items share one. */
async function batchKey(items: readonly unknown[]): Promise<string | null> {
  const keys = items.map(itemKey);
  if (keys.some((key) => key === null) || new Set(keys).size !== keys.length) return null;
  if (keys.length === 1) return keys[0]!;
  return `batch:${await sha256Hex(utf8Bytes(JSON.stringify(keys.sort())))}`;
}

export const adyen: ProviderAdapter = {
  provider: "adyen",
  keptHeaders: ["content-type", "user-agent"],

  async verify(input) {
    if (input.secrets.length === 0) return rejected("no-usable-secret");
    const payload = parseUnverifiedJson(input.rawBody);
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
      for (const key of keys)
        if (await anySignatureVerifies(key, [signature], utf8Bytes(signingString(item)))) verified = true;
      if (!verified) return rejected("signature-mismatch");
    }
    const eventKey = await batchKey(items);
    if (!eventKey) return rejected("malformed-payload");
    const first = items[0];
    return {
      kind: "event",
      identity: {
        eventKey,
        eventKeyOrigin: "provider-id",
        // Each item's key is made of fields its HMAC signing string covers.
        eventKeySigned: true,
        eventType: stringAtPath(first, "eventCode"),
        subjectId: stringAtPath(first, "pspReference"),
        version: null,
        occurredAt: timeAtPath(first, "eventDate"),
        annotations: {
          ...annotationsFrom({ "merchant-reference": stringAtPath(first, "merchantReference") }),
          ...batchItemAnnotations(
            items.length,
            items.map((item) => stringAtPath(item, "pspReference")),
          ),
        },
      },
      acknowledgement: { status: 200, text: "[accepted]" },
    };
  },
};
