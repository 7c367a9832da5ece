import { utf8Bytes } from "../crypto/encoding";
import { parseJsonBody, stringAtPath } from "./json";
import {
  annotationsFrom,
  describePayload,
  event,
  eventKeyOf,
  parseUnixSeconds,
  presentedSignatures,
  signedAdapter,
  utf8Key,
} from "./signed";
import { parseUnverifiedForm, parseUnverifiedJson } from "./unverified";

/**
 * Mailgun: the signature travels inside the body — `signature: {timestamp, token, signature}` in JSON webhooks, or
 * `timestamp`, `token`, `signature` form fields for routes — as hex HMAC-SHA256 over timestamp‖token keyed by the
 * account's webhook signing key. It does not cover the rest of the body, so the key is the signed `token` (Mailgun's
 * own advice: honour no token twice), never the unsigned `event-data.id`, which rides along as an annotation. A
 * captured triple beside other event data is then the same key with other bytes: quarantined, never a new event.
 * Mailgun's retries are reported to resend the same signature block, so they stay one event; the tolerance
 * bounds how long a captured triple is worth anything.
 */
function signatureFields(rawBody: Uint8Array): { timestamp: string; token: string; signature: string } | null {
  const json = parseUnverifiedJson(rawBody);
  const fromJson = (name: string) => stringAtPath(json, `signature.${name}`);
  if (json !== undefined) {
    const [timestamp, token, signature] = [fromJson("timestamp"), fromJson("token"), fromJson("signature")];
    return timestamp && token && signature ? { timestamp, token, signature } : null;
  }
  const form = parseUnverifiedForm(rawBody);
  const [timestamp, token, signature] = [form?.get("timestamp"), form?.get("token"), form?.get("signature")];
  return timestamp && token && signature ? { timestamp, token, signature } : null;
}

export const mailgun = signedAdapter({
  provider: "mailgun",
  keptHeaders: ["content-type", "user-agent"],
  defaultToleranceSeconds: 300,

  read({ rawBody }) {
    const fields = signatureFields(rawBody);
    if (!fields) return "missing-signature";
    const signedAt = parseUnixSeconds(fields.timestamp);
    if (signedAt === null || fields.token.length > 256) return "malformed-signature";
    return {
      signatures: presentedSignatures([fields.signature], "hex", "hmac-sha256"),
      signedAt,
      signedContent: utf8Bytes(fields.timestamp + fields.token),
    };
  },

  keyFor: utf8Key("hmac-sha256"),

  async identify({ input, timestampAgeSeconds }) {
    const payload = parseJsonBody(input.rawBody);
    const { token } = signatureFields(input.rawBody)!;
    return event(
      {
        ...(await eventKeyOf(token, input.rawBody, { signed: true })),
        ...describePayload(payload, input.options, {
          type: "event-data.event",
          subject: "event-data.message.headers.message-id",
          occurredAt: "event-data.timestamp",
        }),
        annotations: annotationsFrom({ "mailgun-event-id": stringAtPath(payload, "event-data.id") }),
      },
      timestampAgeSeconds,
    );
  },
});
