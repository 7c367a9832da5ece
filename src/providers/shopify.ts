import { parseJsonBody } from "./json";
import {
  annotationsFrom,
  bodySignature,
  describePayload,
  event,
  eventKeyOf,
  headerTypeUnlessConfigured,
  readHeader,
  signedAdapter,
  utf8Key,
} from "./signed";

/**
 * Shopify: `X-Shopify-Hmac-Sha256: <base64>`, HMAC-SHA256 over the body keyed by the app's client secret as text.
 * The key is `X-Shopify-Webhook-Id` (the same across Shopify's retries). `X-Shopify-Event-Id` is not the key: one
 * event fans out to several subscriptions, each with its own webhook id; it is kept as a correlation annotation.
 */
export const shopify = signedAdapter({
  provider: "shopify",
  keptHeaders: [
    "x-shopify-webhook-id",
    "x-shopify-topic",
    "x-shopify-shop-domain",
    "x-shopify-api-version",
    "x-shopify-triggered-at",
  ],
  read: bodySignature("x-shopify-hmac-sha256", "base64", "hmac-sha256"),
  keyFor: utf8Key("hmac-sha256"),

  async identify({ input }) {
    const headers = input.headers;
    const described = describePayload(parseJsonBody(input.rawBody), input.options, { subject: "admin_graphql_api_id" });
    const triggeredAt = Date.parse(readHeader(headers, "x-shopify-triggered-at") ?? "");
    return event({
      ...(await eventKeyOf(readHeader(headers, "x-shopify-webhook-id"), input.rawBody, { signed: false })),
      ...described,
      eventType: headerTypeUnlessConfigured(input.options, described.eventType, readHeader(headers, "x-shopify-topic")),
      occurredAt: described.occurredAt ?? (Number.isNaN(triggeredAt) ? null : triggeredAt),
      annotations: annotationsFrom({ "x-shopify-event-id": readHeader(headers, "x-shopify-event-id") }),
    });
  },
});
