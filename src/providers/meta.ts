import { challengeText, echo, handshake, tokenMatches, withHandshake } from "./handshake";
import { parseJsonBody, stringAtPath } from "./json";
import { bodySignature, describePayload, event, eventKeyOf, rejected, signedAdapter, utf8Key } from "./signed";

/**
 * Meta (WhatsApp Business, Instagram, Messenger, any Graph API webhook): `X-Hub-Signature-256: sha256=<hex>`,
 * HMAC-SHA256 over the body keyed by the app secret. Subscribing is a GET with `hub.mode=subscribe`,
 * `hub.verify_token` and `hub.challenge`: the challenge is echoed only when the verify token equals one the source
 * names in `verify_token` (constant time). A delivery batches `entry[]` and carries no delivery id, so the key is
 * the payload's SHA-256: Meta's retries resend the same bytes.
 */
const signed = signedAdapter({
  provider: "meta",
  keptHeaders: ["content-type", "user-agent"],
  read: bodySignature("x-hub-signature-256", "hex", "hmac-sha256", "sha256="),
  keyFor: utf8Key("hmac-sha256"),

  async identify({ input }) {
    const payload = parseJsonBody(input.rawBody);
    const described = describePayload(payload, input.options, { subject: "entry.0.id", occurredAt: "entry.0.time" });
    const field =
      stringAtPath(payload, "entry.0.changes.0.field") ??
      (stringAtPath(payload, "entry.0.messaging.0.sender.id") ? "messaging" : null);
    const object = stringAtPath(payload, "object");
    return event({
      ...(await eventKeyOf(null, input.rawBody)),
      ...described,
      eventType: described.eventType ?? (object && field ? `${object}.${field}` : object),
    });
  },
});

export const meta = withHandshake(
  signed,
  async (input) => {
    if (input.method !== "GET") return null;
    const query = new URL(input.url).searchParams;
    const challenge = challengeText(query.get("hub.challenge"));
    if (query.get("hub.mode") !== "subscribe" || !challenge) return rejected("missing-signature");
    if (!(await tokenMatches(query.get("hub.verify_token"), input.verifyTokens))) return rejected("signature-mismatch");
    return handshake(echo(challenge));
  },
  { methods: ["GET", "POST"] },
);
