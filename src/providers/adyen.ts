import { decodeBase64, decodeHex, utf8Bytes } from "../crypto/encoding";
import { anySignatureVerifies } from "../crypto/verify";
import { itemBodies } from "./adyen-items";
import { batchItemAnnotations } from "./batch-items";
import { stringAtPath, timeAtPath, valueAtPath } from "./json";
import { annotationsFrom, MAX_VERIFICATION_STEPS, rejected } from "./signed";
import type { CarriedEvent, ProviderAdapter } from "./types";
import { parseUnverifiedJson } from "./unverified";

/**
 * Adyen standard webhooks: each `notificationItems[].NotificationRequestItem` carries its own
 * `additionalData.hmacSignature`, base64 HMAC-SHA256 keyed by the hex HMAC key over
 * `pspReference:originalReference:merchantAccountCode:merchantReference:value:currency:eventCode:success`.
 * Every item must verify. Adyen signs each item and nothing around them (no timestamp, no batch), so each item is
 * its own event, claimed under its own key `pspReference:eventCode:success` (Adyen's own duplicate rule, every
 * part inside what the item signs): any batch, subset, mix or reordering of captured items then finds each of
 * them already claimed, and a new item beside seen ones is accepted alone. A batch that holds one item twice is
 * refused: Adyen never sends one. A lone item keeps the body as received; a batch's items keep the bodies
 * ./adyen-items.ts cuts. Each receipt keeps its item's `pspReference` (src/providers/batch-items.ts) for the
 * audit's `itemId` filter. Adyen wants `[accepted]`.
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

/** One event per item, each with its own key; null when an item has no key or two items share one. */
function itemEvents(items: readonly unknown[]): CarriedEvent[] | null {
  const keys = items.map(itemKey);
  if (keys.some((key) => key === null) || new Set(keys).size !== keys.length) return null;
  return items.map((item, index) => ({
    identity: {
      eventKey: keys[index]!,
      eventKeyOrigin: "provider-id",
      // Each part of the key is a field the item's HMAC signing string covers.
      eventKeySigned: true,
      eventType: stringAtPath(item, "eventCode"),
      subjectId: stringAtPath(item, "pspReference"),
      version: null,
      occurredAt: timeAtPath(item, "eventDate"),
      annotations: {
        ...annotationsFrom({ "merchant-reference": stringAtPath(item, "merchantReference") }),
        ...batchItemAnnotations(items.length, [stringAtPath(item, "pspReference")]),
      },
    },
  }));
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
      return material && material.length > 0
        ? [{ name: secret.name, algorithm: "hmac-sha256" as const, material }]
        : [];
    });
    // The secret that verified the first item names the delivery's: one batch is signed under one secret.
    let verifiedBy: string | undefined;
    if (items.length * keys.length > MAX_VERIFICATION_STEPS) return rejected("verification-over-budget");
    for (const item of items) {
      const signatureText = stringAtPath(item, "additionalData.hmacSignature");
      if (!signatureText) return rejected("missing-signature");
      const signature = decodeBase64(signatureText);
      if (!signature || signature.length === 0) return rejected("malformed-signature");
      let verified = false;
      for (const key of keys)
        if (await anySignatureVerifies(key, [signature], utf8Bytes(signingString(item)))) {
          verified = true;
          verifiedBy ??= key.name;
        }
      if (!verified) return rejected("signature-mismatch");
    }
    const events = itemEvents(items);
    if (!events) return rejected("malformed-payload");
    const acknowledgement = { status: 200, text: "[accepted]" } as const;
    if (events.length === 1) return { kind: "event", identity: events[0]!.identity, acknowledgement, verifiedBy };
    const bodies = itemBodies(input.rawBody, wrapped);
    if (!bodies) return rejected("malformed-payload");
    const carried = events.map((event, index) => ({ ...event, storedBody: bodies[index] }));
    return { kind: "event", ...carried[0]!, events: carried, acknowledgement, verifiedBy };
  },
};
