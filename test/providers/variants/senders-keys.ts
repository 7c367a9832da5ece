import { env } from "cloudflare:workers";
import fc from "fast-check";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { nowSeconds, secretValue } from "../support/contract";
import { keyStandinOrigin } from "../support/key-standin";
import { ecdsaDerSign, ed25519Sign, hmac, sha256Hex } from "../support/signers";
import { ecdsaRespelled } from "./ecdsa";
import { composed, onFirst, type Sender } from "./property";
import { unsignedHeaders } from "./reencode";
import { signatureListRespelled } from "./senders-body";

/**
 * Senders that sign with a public key (Ed25519, ECDSA) or an id‖time‖body template: Standard Webhooks and the
 * senders that use it by name, Discord-style Ed25519, SendGrid, Plaid, and `generic`. The body is signed, so the
 * variants are header ones, plus another spelling of the same ECDSA signature (n − s, or raw r‖s for DER), which
 * verifies as well as the original: no key here is made of the signature's bytes.
 */

const json = { "content-type": "application/json" };
/** Standard Webhooks: `id.timestamp.body`, HMAC (`v1,`) or Ed25519 (`v1a,`), under webhook-* or svix-* names. */
function standardWebhooks(provider: string, source: string, family: "webhook" | "svix", ed25519 = false): Sender {
  const other = family === "webhook" ? "svix" : "webhook";
  const name = source.replace(/^pv-/, "");
  return {
    provider,
    source,
    deliver(marker) {
      const body = JSON.stringify({ type: "invoice.paid", data: { marker } });
      const webhookId = `msg_${marker}`;
      const t = nowSeconds();
      const content = [`${webhookId}.${t}.`, body] as const;
      const signature = ed25519
        ? `v1a,${ed25519Sign(`PV_${name.replace(/-/g, "_").toUpperCase()}_CURRENT`, ...content).toString("base64")}`
        : `v1,${hmac("sha256", Buffer.from(secretValue(name, "CURRENT").replace(/^whsec_/, ""), "base64"), ...content).toString("base64")}`;
      return {
        body,
        headers: {
          ...json,
          [`${family}-id`]: webhookId,
          [`${family}-timestamp`]: String(t),
          [`${family}-signature`]: signature,
        },
      };
    },
    variants: composed(
      fc.oneof(
        unsignedHeaders([`${other}-id`, `${other}-timestamp`]),
        signatureListRespelled(`${family}-signature`, " ", ed25519 ? "v1a,AAAA" : "v1,AAAA"),
        fc.constant(
          onFirst(`headers renamed ${other}-*`, (delivery) => ({
            ...delivery,
            headers: Object.fromEntries(
              Object.entries(delivery.headers).map(([header, value]) => [
                header.replace(`${family}-`, `${other}-`),
                value,
              ]),
            ),
          })),
        ),
      ),
    ),
  };
}

/** Discord-style Ed25519 over timestamp ‖ body: interactions keyed by their id, webhook events by the payload hash. */
function ed25519(provider: "ed25519" | "discord", source: string): Sender {
  return {
    provider,
    source,
    deliver(marker) {
      const body = JSON.stringify(
        marker.length % 2 === 0
          ? { id: marker, type: 2, application_id: "app1", data: { id: "cmd", name: "ping" } }
          : { version: 1, application_id: "app1", type: 1, event: { type: "ENTITLEMENT_CREATE", data: { marker } } },
      );
      const t = String(nowSeconds());
      return {
        body,
        headers: {
          ...json,
          "x-signature-ed25519": ed25519Sign("PV_ED25519_CURRENT", t, body).toString("hex"),
          "x-signature-timestamp": t,
        },
      };
    },
    variants: composed(unsignedHeaders(["content-type"])),
  };
}

function sendgrid(): Sender {
  return {
    provider: "sendgrid",
    source: "pv-sendgrid",
    deliver(marker) {
      const body = JSON.stringify([
        { email: "a@example.com", event: "delivered", sg_event_id: `${marker}_1`, timestamp: nowSeconds() },
        { email: "b@example.com", event: "open", sg_event_id: `${marker}_2`, timestamp: nowSeconds() },
      ]);
      const t = String(nowSeconds());
      return {
        body,
        headers: {
          ...json,
          "x-twilio-email-event-webhook-signature": ecdsaDerSign("PV_SENDGRID_CURRENT", t, body).toString("base64"),
          "x-twilio-email-event-webhook-timestamp": t,
        },
      };
    },
    variants: composed(
      fc.oneof(
        unsignedHeaders(["content-type"]),
        ecdsaRespelled("x-twilio-email-event-webhook-signature", "der-base64"),
      ),
    ),
  };
}

/** Plaid's ES256 JWT binds the body's SHA-256; its key is published on the key stand-in under a fresh id. */
function plaid(): Sender {
  let signingKey: { kid: string; privateKey: CryptoKey } | undefined;
  return {
    provider: "plaid",
    source: "pv-plaid",
    async setup() {
      const { publicKey, privateKey } = await generateKeyPair("ES256", { extractable: true });
      const kid = crypto.randomUUID();
      const key = {
        ...(await exportJWK(publicKey)),
        kid,
        alg: "ES256",
        use: "sig",
        created_at: 1_700_000_000,
        expired_at: null,
      };
      const secret = (env as unknown as Record<string, string>).PV_PLAID_SECRET!;
      const published = await fetch(`${keyStandinOrigin()}/__plaid/${kid}`, {
        method: "PUT",
        body: JSON.stringify({ secret, key }),
      });
      if (published.status !== 204) throw new Error(`the key stand-in refused the Plaid key: ${published.status}`);
      signingKey = { kid, privateKey };
    },
    async deliver(marker) {
      const body = JSON.stringify({
        webhook_type: "TRANSACTIONS",
        webhook_code: "SYNC_UPDATES_AVAILABLE",
        item_id: marker,
      });
      const token = await new SignJWT({ request_body_sha256: sha256Hex(body) })
        .setProtectedHeader({ alg: "ES256", kid: signingKey!.kid, typ: "JWT" })
        .setIssuedAt()
        .sign(signingKey!.privateKey);
      return { body, headers: { ...json, "plaid-verification": token } };
    },
    variants: composed(
      fc.oneof(unsignedHeaders(["content-type"]), ecdsaRespelled("plaid-verification", "raw-base64url")),
    ),
  };
}

/** `generic` as the fixtures declare it: `{id}.{timestamp}.{body}` keyed by the signed id, and `{timestamp}:{body}`. */
function generic(): Sender {
  return {
    provider: "generic",
    source: "pv-generic",
    deliver(marker) {
      const body = JSON.stringify({ kind: "thing.done", object: { id: marker, revision: 3 } });
      const t = String(nowSeconds());
      const key = Buffer.from(secretValue("generic", "CURRENT"), "base64");
      const signature = `v1=${hmac("sha512", key, `${marker}.${t}.`, body).toString("base64")}`;
      return { body, headers: { ...json, "x-acme-id": marker, "x-acme-timestamp": t, "x-acme-signature": signature } };
    },
    variants: composed(
      fc.oneof(unsignedHeaders(["content-type"]), signatureListRespelled("x-acme-signature", " ", "v1=AAAA")),
    ),
  };
}

function genericEd25519(): Sender {
  return {
    provider: "generic",
    source: "pv-generic-ed25519",
    deliver(marker) {
      const body = JSON.stringify({ kind: "relay.sent", meta: { delivery_id: marker } });
      const t = String(Date.now());
      const signature = ed25519Sign("PV_GENERIC_ED25519_CURRENT", `${t}:`, body).toString("hex");
      return { body, headers: { ...json, "x-relay-timestamp": t, "x-relay-signature": signature } };
    },
    variants: composed(unsignedHeaders(["content-type"])),
  };
}

export const keySigned: readonly Sender[] = [
  standardWebhooks("standard-webhooks", "pv-standard", "webhook"),
  standardWebhooks("svix", "pv-standard-v1a", "svix", true),
  standardWebhooks("clerk", "pv-clerk", "svix"),
  standardWebhooks("resend", "pv-resend", "svix"),
  standardWebhooks("brex", "pv-brex", "webhook"),
  standardWebhooks("openai", "pv-openai", "webhook"),
  ed25519("ed25519", "pv-variants-ed25519"),
  ed25519("discord", "pv-ed25519"),
  sendgrid(),
  plaid(),
  generic(),
  genericEd25519(),
];
