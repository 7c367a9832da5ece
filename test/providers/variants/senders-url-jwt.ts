import fc from "fast-check";
import { SignJWT } from "jose";
import { secretValue, withHeader } from "../support/contract";
import { hmac, sha256Hex } from "../support/signers";
import { composed, type Delivery, onFirst, type Sender } from "./property";
import { queryAdded, unsignedHeaders, urlTailIntoBody } from "./reencode";

/**
 * More senders whose signature covers the whole body, with a URL (Square), an id and time (Twitch) or in a JWT that
 * holds the body's hash (Netlify): the variants are header ones, and where the URL called is not what is signed, a
 * query on it or its last character moved into the body.
 */

const hex = (bytes: Buffer) => bytes.toString("hex");
const b64 = (bytes: Buffer) => bytes.toString("base64");
const secret = (name: string) => secretValue(name, "CURRENT");
const json = { "content-type": "application/json" };
const url = (source: string) => `https://receiver.test/webhooks/${source}`;

/**
 * Square signs its `notification_url` ‖ body, never the URL called (src/providers/square.ts): a query on the URL
 * called, or its last character moved into the body, changes nothing signed or changes the body.
 */
function square(): Sender {
  const called = `${url("pv-square")}?tenant=7`;
  return {
    provider: "square",
    source: "pv-square",
    deliver(marker) {
      const body = JSON.stringify({ event_id: marker, type: "payment.updated", data: { id: marker } });
      const signed = hmac("sha256", secret("square"), "https://hooks.example.com/webhooks/pv-square", body);
      return {
        url: called,
        body,
        headers: { ...json, "x-square-hmacsha256-signature": b64(signed), "square-retry-number": "1" },
      };
    },
    variants: composed(
      fc.oneof(
        unsignedHeaders(["square-retry-number", "square-retry-reason", "square-version"]),
        queryAdded,
        urlTailIntoBody,
      ),
    ),
  };
}

function twitch(): Sender {
  return {
    provider: "twitch",
    source: "pv-twitch",
    deliver(marker) {
      const body = JSON.stringify({ subscription: { id: marker, type: "channel.follow" }, event: { user_id: "1" } });
      const messageId = crypto.randomUUID();
      const at = new Date().toISOString();
      return {
        body,
        headers: {
          ...json,
          "twitch-eventsub-message-id": messageId,
          "twitch-eventsub-message-timestamp": at,
          "twitch-eventsub-message-signature": `sha256=${hex(hmac("sha256", secret("twitch"), messageId, at, body))}`,
          "twitch-eventsub-message-type": "notification",
          "twitch-eventsub-subscription-type": "channel.follow",
          "twitch-eventsub-subscription-version": "2",
        },
      };
    },
    variants: composed(
      fc.oneof(
        unsignedHeaders(["twitch-eventsub-subscription-type", "twitch-eventsub-subscription-version"]),
        fc
          .constantFrom("revocation", "notification")
          .map((type) =>
            onFirst(
              `message type ${type}`,
              (delivery) => withHeader(delivery, "twitch-eventsub-message-type", type) as Delivery,
            ),
          ),
      ),
    ),
  };
}

function intercom(): Sender {
  return {
    provider: "intercom",
    source: "pv-intercom",
    deliver(marker) {
      const body = JSON.stringify({ id: `notif_${marker}`, topic: "conversation.user.created", data: { item: {} } });
      return { body, headers: { ...json, "x-hub-signature": `sha1=${hex(hmac("sha1", secret("intercom"), body))}` } };
    },
    variants: composed(unsignedHeaders(["content-type"])),
  };
}

/** Meta and the names of its products: one app-level scheme, keyed by the payload hash. */
function meta(provider: "meta" | "whatsapp" | "instagram" | "messenger"): Sender {
  return {
    provider,
    source: `pv-${provider}`,
    deliver(marker) {
      const body = JSON.stringify({
        object: "whatsapp_business_account",
        entry: [{ id: "1029", time: 1_700_000_000, changes: [{ field: "messages", value: { marker } }] }],
      });
      return {
        body,
        headers: { ...json, "x-hub-signature-256": `sha256=${hex(hmac("sha256", secret(provider), body))}` },
      };
    },
    variants: composed(unsignedHeaders(["content-type"])),
  };
}

/** Netlify's JWS holds the body's SHA-256, so the body is pinned; `Bearer ` before the token reads the same. */
function netlify(): Sender {
  return {
    provider: "netlify",
    source: "pv-netlify",
    async deliver(marker) {
      const body = JSON.stringify({ id: marker, state: "ready" });
      const token = await new SignJWT({ iss: "netlify", sha256: sha256Hex(body) })
        .setProtectedHeader({ alg: "HS256", typ: "JWT" })
        .sign(new TextEncoder().encode(secret("netlify")));
      return { body, headers: { ...json, "x-webhook-signature": token, "x-netlify-event": "deploy_created" } };
    },
    variants: composed(
      fc.oneof(
        unsignedHeaders(["x-netlify-event"]),
        fc.constant(
          onFirst(
            "Bearer token",
            (delivery) =>
              withHeader(
                delivery,
                "x-webhook-signature",
                `Bearer ${delivery.headers["x-webhook-signature"]}`,
              ) as Delivery,
          ),
        ),
      ),
    ),
  };
}

export const bodySignedMore: readonly Sender[] = [
  square(),
  twitch(),
  intercom(),
  meta("meta"),
  meta("whatsapp"),
  meta("instagram"),
  meta("messenger"),
  netlify(),
];
