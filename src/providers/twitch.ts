import { concatBytes, utf8Bytes } from "../crypto/encoding";
import { parseJsonBody, stringAtPath } from "./json";
import {
  annotationsFrom,
  describePayload,
  event,
  eventKeyOf,
  headerTypeUnlessConfigured,
  presentedSignatures,
  readHeader,
  signedAdapter,
  utf8Key,
} from "./signed";

/**
 * Twitch EventSub (webhook transport): `Twitch-Eventsub-Message-Signature: sha256=<hex>`, HMAC-SHA256 over
 * message id ‖ timestamp ‖ body (no separators) keyed by the subscription's secret, with Twitch's 10-minute
 * tolerance on the RFC 3339 `Twitch-Eventsub-Message-Timestamp`. The key is `Twitch-Eventsub-Message-Id` (a resend
 * keeps it). A `webhook_callback_verification` message is answered with its challenge once it verifies; a
 * `revocation` is recorded as an event of type `revocation`.
 */
const RFC3339_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?Z$/;

export const twitch = signedAdapter({
  provider: "twitch",
  keptHeaders: [
    "twitch-eventsub-message-id",
    "twitch-eventsub-message-type",
    "twitch-eventsub-message-timestamp",
    "twitch-eventsub-subscription-type",
    "twitch-eventsub-subscription-version",
  ],
  defaultToleranceSeconds: 600,

  read({ headers, rawBody }) {
    const messageId = readHeader(headers, "twitch-eventsub-message-id");
    const timestampText = readHeader(headers, "twitch-eventsub-message-timestamp");
    const signature = readHeader(headers, "twitch-eventsub-message-signature");
    if (!messageId || !timestampText || !signature) return "missing-signature";
    if (!RFC3339_UTC.test(timestampText) || !signature.startsWith("sha256=")) return "malformed-signature";
    const signedAtMs = Date.parse(timestampText);
    if (Number.isNaN(signedAtMs)) return "malformed-signature";
    return {
      signatures: presentedSignatures([signature.slice("sha256=".length)], "hex", "hmac-sha256"),
      signedAt: Math.floor(signedAtMs / 1000),
      signedContent: concatBytes(utf8Bytes(messageId + timestampText), rawBody),
    };
  },

  keyFor: utf8Key("hmac-sha256"),

  async identify({ input, timestampAgeSeconds }) {
    const headers = input.headers;
    const payload = parseJsonBody(input.rawBody);
    const messageType = readHeader(headers, "twitch-eventsub-message-type");
    if (messageType === "webhook_callback_verification") {
      const challenge = stringAtPath(payload, "challenge");
      if (!challenge || challenge.length > 512) return { kind: "rejected", reason: "malformed-payload" };
      return {
        kind: "handshake",
        response: new Response(challenge, { headers: { "content-type": "text/plain; charset=utf-8" } }),
      };
    }
    const described = describePayload(payload, input.options, { subject: "subscription.id" });
    const signedAt = Date.parse(readHeader(headers, "twitch-eventsub-message-timestamp")!);
    return event(
      {
        ...(await eventKeyOf(readHeader(headers, "twitch-eventsub-message-id"), input.rawBody, { signed: true })),
        ...described,
        eventType: headerTypeUnlessConfigured(
          input.options,
          described.eventType,
          messageType === "revocation" ? "revocation" : readHeader(headers, "twitch-eventsub-subscription-type"),
        ),
        occurredAt: described.occurredAt ?? signedAt,
        annotations: annotationsFrom({ "twitch-eventsub-message-type": messageType }),
      },
      timestampAgeSeconds,
    );
  },
});
