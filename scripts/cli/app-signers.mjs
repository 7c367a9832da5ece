// Signers for senders that are written out in the receiver rather than as preset tables: Meta's app webhooks,
// Microsoft Graph's clientState, the HS256 JWTs of monday.com and Netlify, and Adyen's per-item HMAC. Each follows
// the sender's documented recipe with node:crypto.
import { createHash, createHmac, randomUUID } from "node:crypto";
import { withValueAt } from "./payload.mjs";

/** @typedef {import("./signers.mjs").Scheme} Scheme */

const json = { "content-type": "application/json" };
const sha256Hex = (/** @type {string} */ text) => createHash("sha256").update(text).digest("hex");
const base64url = (/** @type {string | Buffer} */ value) => Buffer.from(value).toString("base64url");
const pretty = (/** @type {unknown} */ payload) =>
  typeof payload === "string" ? payload : JSON.stringify(payload, null, 2);

/** An HS256 JWS over the claims, as monday.com and Netlify send it. */
function hs256(/** @type {string} */ secret, /** @type {Record<string, unknown>} */ claims) {
  const signingInput = `${base64url(JSON.stringify({ alg: "HS256", typ: "JWT" }))}.${base64url(JSON.stringify(claims))}`;
  return `${signingInput}.${createHmac("sha256", secret).update(signingInput).digest("base64url")}`;
}

/** @type {Record<string, Scheme>} */
export const appSchemes = {
  meta: {
    keyIn: "payload-hash",
    sign(input) {
      // Meta batches entries and sends no delivery id: the fresh message id makes each send a new payload.
      const body = pretty(input.payload);
      return {
        body,
        headers: {
          ...json,
          "x-hub-signature-256": `sha256=${createHmac("sha256", input.secret).update(body).digest("hex")}`,
          "user-agent": "facebookexternalua",
        },
      };
    },
  },

  "microsoft-graph": {
    keyIn: "payload-hash",
    sign(input) {
      // Each notification proves itself with the clientState given when subscribing: the source's secret.
      const payload = /** @type {{ value?: Record<string, unknown>[] }} */ (input.payload);
      const items = (payload.value ?? []).map((item) => ({ ...item, clientState: input.secret }));
      const body = JSON.stringify({ ...payload, value: items }, null, 2);
      // The receiver keeps (and keys) the notification with every clientState redacted, re-serialized compactly.
      const stored = JSON.stringify({
        ...payload,
        value: items.map((item) => ({ ...item, clientState: "[redacted]" })),
      });
      return { body, headers: json, eventKey: sha256Hex(stored) };
    },
  },

  monday: {
    keyIn: "body",
    sign(input) {
      const body = pretty(withValueAt(input.payload, "event.triggerUuid", input.eventKey));
      const now = Math.floor(input.now.getTime() / 1000);
      // monday.com's JWT proves the app, not the body, and says when it expires. The receiver honours a token
      // once (another body under it is quarantined), so each send mints its own: two sends in one second differ.
      const token = hs256(input.secret, {
        dat: { client_id: "cli", user_id: 1, account_id: 1 },
        jti: randomUUID(),
        iat: now,
        exp: now + 300,
      });
      return { body, headers: { ...json, authorization: token } };
    },
  },

  netlify: {
    keyIn: "payload-hash",
    sign(input) {
      const body = pretty(input.payload);
      // Netlify's JWS binds the body by its SHA-256 and carries no expiry.
      const token = hs256(input.secret, { iss: "netlify", sha256: sha256Hex(body) });
      return {
        body,
        headers: {
          ...json,
          "x-webhook-signature": token,
          "x-netlify-event": "deploy_created",
          "user-agent": "Netlify",
        },
      };
    },
  },

  adyen: {
    /**
     * The fields of one Adyen NotificationRequestItem the signature covers; others pass through unread.
     * @typedef {{ pspReference?: string, originalReference?: string, merchantAccountCode?: string, merchantReference?: string,
     *   amount?: { value?: number, currency?: string }, eventCode?: string, success?: string,
     *   additionalData?: Record<string, unknown>, [field: string]: unknown }} AdyenItem
     */
    keyIn: "body",
    sign(input) {
      // Each item is signed on its own, keyed by the hex HMAC key, over Adyen's colon-joined fields.
      const payload = /** @type {{ notificationItems?: { NotificationRequestItem: AdyenItem }[] }} */ (
        structuredClone(input.payload)
      );
      const key = Buffer.from(input.secret, "hex");
      const items = (payload.notificationItems ?? []).map(({ NotificationRequestItem: item }, index) => {
        const signed = { ...item, pspReference: index === 0 ? input.eventKey : `${input.eventKey}${index}` };
        const field = (/** @type {unknown} */ value) => (value === undefined || value === null ? "" : String(value));
        const signingString = [
          signed.pspReference,
          signed.originalReference,
          signed.merchantAccountCode,
          signed.merchantReference,
          signed.amount?.value,
          signed.amount?.currency,
          signed.eventCode,
          signed.success,
        ]
          .map(field)
          .join(":");
        signed.additionalData = {
          ...signed.additionalData,
          hmacSignature: createHmac("sha256", key).update(signingString).digest("base64"),
        };
        return { NotificationRequestItem: signed };
      });
      const first = items[0]?.NotificationRequestItem;
      const body = JSON.stringify({ ...payload, notificationItems: items }, null, 2);
      // One item's key is Adyen's own duplicate rule: pspReference:eventCode:success.
      return {
        body,
        headers: json,
        eventKey: first ? `${first.pspReference}:${first.eventCode}:${first.success}` : input.eventKey,
      };
    },
  },
};
