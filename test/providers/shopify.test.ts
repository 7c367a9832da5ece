import { describe, expect, it } from "vitest";
import {
  adapterContract,
  expectAccepted,
  type SignArgs,
  secretValue,
  storedReceipt,
  uniqueKey,
  withHeader,
} from "./support/contract";
import { hmac } from "./support/signers";

// No maintained Shopify signer runs standalone (the @shopify/shopify-api package needs a whole app config), so the
// independent signer is node:crypto with Shopify's documented recipe: base64 HMAC-SHA256 of the raw body.
const TRIGGERED_AT = "2026-11-30T08:00:00.123Z";

function signShopify({ secret, eventKey }: SignArgs, eventId = `evt-${eventKey}`) {
  const body = JSON.stringify({
    id: 820982911946154500,
    admin_graphql_api_id: `gid://shopify/Order/${eventKey}`,
    total_price: "10.00",
  });
  return {
    body,
    headers: {
      "x-shopify-hmac-sha256": hmac("sha256", secret, body).toString("base64"),
      "x-shopify-webhook-id": eventKey,
      "x-shopify-event-id": eventId,
      "x-shopify-topic": "orders/create",
      "x-shopify-shop-domain": "acme.myshopify.com",
      "x-shopify-triggered-at": TRIGGERED_AT,
      "content-type": "application/json",
    },
  };
}

adapterContract({
  name: "shopify",
  sign: (args) => signShopify(args),
  expected: ({ eventKey }) => ({
    eventKey,
    eventType: "orders/create",
    subjectId: `gid://shopify/Order/${eventKey}`,
    occurredAt: Date.parse(TRIGGERED_AT),
    kept: { "x-shopify-event-id": `evt-${eventKey}`, "x-shopify-shop-domain": "acme.myshopify.com" },
  }),
  signatureHeaders: ["x-shopify-hmac-sha256"],
  malformEncoding: (request) => withHeader(request, "x-shopify-hmac-sha256", "abc"),
  junkSignature: (request) => withHeader(request, "x-shopify-hmac-sha256", "!!not-base64!!, ==="),
  timestamped: false,
});

describe("shopify: scheme specifics", () => {
  it("the key is X-Shopify-Webhook-Id: two subscriptions' deliveries of one event (one X-Shopify-Event-Id) are two receipts", async () => {
    const sharedEventId = uniqueKey("shared_event");
    const receipts = [];
    for (const eventKey of [uniqueKey("wh_a"), uniqueKey("wh_b")]) {
      const args = {
        secret: secretValue("shopify", "CURRENT"),
        secretName: "",
        eventKey,
        timestamp: 0,
        source: "pv-shopify",
      };
      receipts.push(await expectAccepted("pv-shopify", signShopify(args, sharedEventId)));
    }
    const stored = await Promise.all(receipts.map((receiptId) => storedReceipt("pv-shopify", receiptId)));
    expect(stored.map((receipt) => receipt.keptHeaders["x-shopify-event-id"])).toEqual([sharedEventId, sharedEventId]);
    expect(new Set(stored.map((receipt) => receipt.eventKey)).size).toBe(2);
  });
});
