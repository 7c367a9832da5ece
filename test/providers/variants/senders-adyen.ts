import { hmacValidator as AdyenHmacValidator } from "@adyen/api-library";
import fc from "fast-check";
import { secretValue } from "../support/contract";
import { type Delivery, type Sender, variant } from "./property";
import { jsonFieldsChanged, jsonReencoded, setAt, shuffled } from "./reencode";

const json = { "content-type": "application/json" };

type AdyenItem = Record<string, unknown>;
const itemsOf = (delivery: Delivery): AdyenItem[] =>
  (JSON.parse(delivery.body).notificationItems as { NotificationRequestItem: AdyenItem }[]).map(
    (entry) => entry.NotificationRequestItem,
  );
const adyenBody = (items: readonly AdyenItem[]) =>
  JSON.stringify({ live: "false", notificationItems: items.map((item) => ({ NotificationRequestItem: item })) });

function adyenItem(pspReference: string, eventCode: string): AdyenItem {
  const item = {
    pspReference,
    originalReference: "",
    merchantAccountCode: "YOUR_MERCHANT_ACCOUNT",
    merchantReference: "order-7",
    amount: { value: 1130, currency: "EUR" },
    eventCode,
    success: "true",
    eventDate: "2026-11-30T08:00:00+01:00",
    additionalData: {} as Record<string, string>,
  };
  item.additionalData.hmacSignature = new AdyenHmacValidator().calculateHmac(
    item as never,
    secretValue("adyen", "CURRENT"),
  );
  return item;
}

/**
 * Adyen: every item carries its own HMAC, and nothing signs the batch around them. So a run captures two batches,
 * and the variants regroup signed items: a subset, items of both, one reordered, plus re-encodings and changes to
 * the fields no item signs.
 */
export function adyenSender(): Sender {
  const regrouped = (label: string, regroup: (first: AdyenItem[], second: AdyenItem[]) => AdyenItem[]) =>
    variant(label, ([first, second]) => ({ ...first!, body: adyenBody(regroup(itemsOf(first!), itemsOf(second!))) }));
  return {
    provider: "adyen",
    source: "pv-adyen",
    captured: 2,
    deliver: (marker) => ({
      body: adyenBody([
        adyenItem(`${marker}_a`, "AUTHORISATION"),
        adyenItem(`${marker}_b`, "CAPTURE"),
        adyenItem(`${marker}_c`, "REFUND"),
      ]),
      headers: json,
    }),
    variants: fc.oneof(
      fc
        .subarray([0, 1, 2], { minLength: 1, maxLength: 2 })
        .map((kept) =>
          regrouped(`items ${kept.join(",")} of the first batch`, (first) => kept.map((index) => first[index]!)),
        ),
      fc
        .tuple(fc.nat(2), fc.nat(2))
        .map(([mine, theirs]) =>
          regrouped(`item ${mine} of the first batch with item ${theirs} of the second`, (first, second) => [
            first[mine]!,
            second[theirs]!,
          ]),
        ),
      fc.constant(regrouped("both batches in one", (first, second) => [...first, ...second])),
      fc
        .integer({ min: 1, max: 2 ** 31 })
        .map((seed) => regrouped(`items shuffled (${seed})`, (first) => shuffled(first, seed))),
      jsonReencoded,
      jsonFieldsChanged(["live"]),
      fc
        .constantFrom("eventDate", "reason", "additionalData.note")
        .map((field) =>
          regrouped(`each item's ${field} changed`, (first) =>
            first.map((item) => setAt(item, field, "2026-12-01T00:00:00Z") as AdyenItem),
          ),
        ),
    ),
  };
}
