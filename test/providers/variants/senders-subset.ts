import fc from "fast-check";
import { SignJWT } from "jose";
import { secretValue } from "../support/contract";
import { hmac, sha256Hex } from "../support/signers";
import { composed, onFirst, type Sender } from "./property";
import {
  formBoundaryMoved,
  formReencoded,
  jsonEscaped,
  jsonFieldsChanged,
  jsonIndented,
  jsonReencoded,
  unsignedHeaders,
} from "./reencode";

/**
 * Senders whose signature covers less than the bytes received: Twilio (the URL and the form's parameters, not their
 * order or spelling), Mailgun (a timestamp and token inside the body), monday.com (a JWT beside the body), and the
 * shared-token senders GitLab and Microsoft Graph (Adyen's items: senders-adyen.ts). Here the body itself
 * may change; what decides is whether the key is made of what the signature covers.
 */

const form = { "content-type": "application/x-www-form-urlencoded" };
const json = { "content-type": "application/json" };
const url = (source: string) => `https://receiver.test/webhooks/${source}`;

/** Twilio's form deliveries: HMAC-SHA1 over the URL and every parameter sorted by name, name‖value. */
function twilioForm(): Sender {
  return {
    provider: "twilio",
    source: "pv-twilio",
    kind: "form",
    deliver(marker) {
      const params = new URLSearchParams({
        MessageSid: `SM${marker}`,
        AccountSid: "AC1",
        From: "+15551234567",
        To: "+15557654321",
        Body: "Hello world, café",
        MessageStatus: "received",
      });
      const sorted = [...params].sort(([a], [b]) => (a < b ? -1 : 1)).map(([name, value]) => name + value);
      const signature = hmac("sha1", secretValue("twilio", "CURRENT"), url("pv-twilio"), ...sorted).toString("base64");
      return {
        body: params.toString(),
        headers: { ...form, "x-twilio-signature": signature, "i-twilio-idempotency-token": crypto.randomUUID() },
      };
    },
    variants: composed(fc.oneof(formReencoded, formBoundaryMoved, unsignedHeaders(["i-twilio-idempotency-token"]))),
  };
}

/** Twilio's JSON deliveries: the URL carries the body's SHA-256 and only the URL is signed. */
function twilioJson(): Sender {
  return {
    provider: "twilio",
    source: "pv-twilio",
    kind: "JSON",
    deliver(marker) {
      const body = JSON.stringify({ EventType: "com.twilio.messaging.message.delivered", data: { marker } });
      const signedUrl = `${url("pv-twilio")}?bodySHA256=${sha256Hex(body)}`;
      const signature = hmac("sha1", secretValue("twilio", "CURRENT"), signedUrl).toString("base64");
      return {
        url: signedUrl,
        body,
        headers: { ...json, "x-twilio-signature": signature, "i-twilio-idempotency-token": crypto.randomUUID() },
      };
    },
    variants: composed(unsignedHeaders(["i-twilio-idempotency-token"])),
  };
}

function mailgunSignature(marker: string) {
  const timestamp = String(Math.floor(Date.now() / 1000));
  const token = sha256Hex(marker).slice(0, 50);
  const signature = hmac("sha256", secretValue("mailgun", "CURRENT"), timestamp, token).toString("hex");
  return { timestamp, token, signature };
}

/** Mailgun: the MAC covers timestamp‖token only; the rest of the body rides beside it. */
function mailgunJson(): Sender {
  return {
    provider: "mailgun",
    source: "pv-mailgun",
    kind: "JSON",
    deliver(marker) {
      const eventData = {
        id: `ev_${marker}`,
        event: "delivered",
        recipient: "a@example.com",
        message: { headers: {} },
      };
      return { body: JSON.stringify({ signature: mailgunSignature(marker), "event-data": eventData }), headers: json };
    },
    variants: composed(
      fc.oneof(jsonReencoded, jsonFieldsChanged(["event-data.id", "event-data.event", "event-data.recipient"])),
    ),
  };
}

function mailgunForm(): Sender {
  const eventChanged = fc.constantFrom("failed", "opened").map((event) =>
    onFirst(`event=${event}`, (delivery) => ({
      ...delivery,
      body: delivery.body.replace(/event=[a-z]+/, `event=${event}`),
    })),
  );
  return {
    provider: "mailgun",
    source: "pv-mailgun",
    kind: "form",
    deliver(marker) {
      const params = new URLSearchParams({
        ...mailgunSignature(marker),
        recipient: "a b@example.com",
        event: "delivered",
      });
      return { body: params.toString(), headers: form };
    },
    variants: composed(fc.oneof(formReencoded, eventChanged)),
  };
}

/** monday.com: an HS256 JWT that says who sent the delivery, not what it holds; the key is `event.triggerUuid`. */
function monday(): Sender {
  return {
    provider: "monday",
    source: "pv-monday",
    async deliver(marker) {
      const body = JSON.stringify({ event: { type: "create_pulse", triggerUuid: marker, pulseId: 9571351437 } });
      // As monday.com mints one per request: per-request claims, five minutes to live.
      const token = await new SignJWT({ dat: { client_id: "c" }, shortLivedToken: `slt_${marker}` })
        .setProtectedHeader({ alg: "HS256", typ: "JWT" })
        .setIssuedAt()
        .setExpirationTime("5m")
        .sign(new TextEncoder().encode(secretValue("monday", "CURRENT")));
      return { body, headers: { ...json, authorization: token } };
    },
    variants: composed(
      fc.oneof(jsonReencoded, jsonFieldsChanged(["event.pulseId", "event.type", "event.triggerUuid"])),
    ),
  };
}

/** GitLab's token signs nothing: only changes that keep the bytes (headers) or the key (the body) are replays. */
function gitlab(): Sender {
  return {
    provider: "gitlab",
    source: "pv-gitlab",
    deliver(marker) {
      return {
        body: JSON.stringify({ object_kind: "push", checkout_sha: marker }),
        headers: {
          ...json,
          "x-gitlab-token": secretValue("gitlab", "CURRENT"),
          "idempotency-key": crypto.randomUUID(),
          "x-gitlab-event-uuid": crypto.randomUUID(),
          "x-gitlab-event": "Push Hook",
        },
      };
    },
    variants: fc.oneof(
      unsignedHeaders(["idempotency-key", "x-gitlab-event-uuid", "x-gitlab-event"]),
      jsonReencoded,
      jsonFieldsChanged(["object_kind", "ref"]),
    ),
  };
}

/** Graph's clientState is a token in each item; the key is the SHA-256 of the body re-serialized with it redacted. */
function microsoftGraph(): Sender {
  return {
    provider: "microsoft-graph",
    source: "pv-microsoft-graph",
    deliver(marker) {
      const item = {
        subscriptionId: "sub-1",
        clientState: secretValue("microsoft-graph", "CURRENT"),
        changeType: "created",
      };
      return {
        body: JSON.stringify({ value: [{ ...item, resource: `Users/${marker}`, tenantId: "t" }] }),
        headers: json,
      };
    },
    variants: fc.oneof(unsignedHeaders(["content-type"]), jsonIndented, jsonEscaped),
  };
}

export const subsetSigned: readonly Sender[] = [
  twilioForm(),
  twilioJson(),
  mailgunJson(),
  mailgunForm(),
  monday(),
  gitlab(),
  microsoftGraph(),
];
