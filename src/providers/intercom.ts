import { parseJsonBody, stringAtPath } from "./json";
import { bodySignature, describePayload, event, eventKeyOf, signedAdapter, utf8Key } from "./signed";

/**
 * Intercom: `X-Hub-Signature: sha1=<hex>`, HMAC-SHA1 over the body keyed by the app's client secret. The key is the
 * notification `id` in the body; the type is its `topic`. The signature has no timestamp.
 */
export const intercom = signedAdapter({
  provider: "intercom",
  keptHeaders: ["content-type", "user-agent"],
  read: bodySignature("x-hub-signature", "hex", "hmac-sha1", "sha1="),
  keyFor: utf8Key("hmac-sha1"),

  async identify({ input }) {
    const payload = parseJsonBody(input.rawBody);
    return event({
      ...(await eventKeyOf(stringAtPath(payload, "id"), input.rawBody, { signed: true })),
      ...describePayload(payload, input.options, { type: "topic", subject: "data.item.id", occurredAt: "created_at" }),
    });
  },
});
