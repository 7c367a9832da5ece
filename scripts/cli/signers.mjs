// One signer per provider, as the real sender signs, so `send` exercises the receiver's own verification. Where
// the test suite signs with the provider's SDK (Stripe, GitHub/Octokit, Standard Webhooks, Twilio) this does too;
// the others follow each provider's documented recipe with node:crypto, all in this one file.
import { createHash, createHmac, createPrivateKey, sign as cryptoSign } from "node:crypto";
import { sign as octokitSign } from "@octokit/webhooks-methods";
import { Webhook as StandardWebhook } from "standardwebhooks";
import Stripe from "stripe";
import twilioLibrary from "twilio";
import { CliError } from "./errors.mjs";

/**
 * @typedef {object} SignInput
 * @property {unknown} payload the sample: parsed JSON, or a string sent as is
 * @property {string} eventKey the id the provider would put where it puts its dedupe key
 * @property {string} secret the secret (or public key) the source lists, from .dev.vars
 * @property {string} secretName its name, for messages
 * @property {() => string} privateKey the matching private key, for asymmetric schemes (read lazily)
 * @property {string} url the URL the request is posted to
 * @property {Record<string, unknown>} options the source's table from wrangler.toml
 * @property {Date} now
 * @typedef {{ body: string, headers: Record<string, string> }} SignedRequest
 * @typedef {{ keyIn: "header" | "body" | "payload-hash", asymmetric?: boolean, sign(input: SignInput): SignedRequest | Promise<SignedRequest> }} Scheme
 */

const json = { "content-type": "application/json" };
const unixSeconds = (/** @type {Date} */ now) => Math.floor(now.getTime() / 1000);
const hmac = (/** @type {string} */ algorithm, /** @type {string | Buffer} */ key, /** @type {(string | Buffer)[]} */ ...parts) => {
  const mac = createHmac(algorithm, key);
  for (const part of parts) mac.update(part);
  return mac.digest();
};

/** The sample as the bytes to send; a string (a file that is not JSON) goes out untouched. */
function bodyOf(/** @type {unknown} */ payload) {
  return typeof payload === "string" ? payload : JSON.stringify(payload, null, 2);
}

/** A copy of a JSON sample with `value` written at a dotted path, e.g. `event-data.id`; strings stay as they are. */
export function withValueAt(/** @type {unknown} */ payload, /** @type {string} */ path, /** @type {unknown} */ value) {
  if (typeof payload !== "object" || payload === null || Array.isArray(payload)) return payload;
  const copy = structuredClone(payload);
  const keys = path.split(".");
  let node = /** @type {Record<string, unknown>} */ (copy);
  for (const key of keys.slice(0, -1)) {
    if (typeof node[key] !== "object" || node[key] === null) node[key] = {};
    node = /** @type {Record<string, unknown>} */ (node[key]);
  }
  node[keys.at(-1) ?? ""] = value;
  return copy;
}

function valueAt(/** @type {unknown} */ payload, /** @type {string} */ path) {
  let node = payload;
  for (const key of path.split(".")) node = typeof node === "object" && node !== null ? /** @type {Record<string, unknown>} */ (node)[key] : undefined;
  return node;
}

function privateKeyObject(/** @type {string} */ text, /** @type {string} */ secretName) {
  try {
    return text.includes("BEGIN") ? createPrivateKey(text) : createPrivateKey({ key: Buffer.from(text, "base64"), format: "der", type: "pkcs8" });
  } catch {
    throw new CliError(`${secretName}_PRIVATE_KEY is not a PKCS#8 private key: make a pair with npm run cli -- secret ed25519 ${secretName} (or p256)`);
  }
}

const ed25519Signature = (/** @type {SignInput} */ input, /** @type {(string | Buffer)[]} */ ...parts) =>
  cryptoSign(null, Buffer.concat(parts.map((part) => Buffer.from(part))), privateKeyObject(input.privateKey(), input.secretName));

/** @type {Scheme} */
const standardWebhooks = {
  keyIn: "header",
  sign(input) {
    const body = bodyOf(input.payload);
    const timestamp = String(unixSeconds(input.now));
    // Svix sends the same scheme under svix-* names; a whpk_ "secret" means the sender signs with Ed25519 (v1a).
    const prefix = input.options.provider === "svix" ? "svix" : "webhook";
    const signature = input.secret.startsWith("whpk_")
      ? `v1a,${ed25519Signature(input, `${input.eventKey}.${timestamp}.`, body).toString("base64")}`
      : new StandardWebhook(input.secret).sign(input.eventKey, input.now, body);
    return { body, headers: { ...json, [`${prefix}-id`]: input.eventKey, [`${prefix}-timestamp`]: timestamp, [`${prefix}-signature`]: signature } };
  },
};

/** @type {Record<string, Scheme>} */
export const schemes = {
  "standard-webhooks": standardWebhooks,
  svix: standardWebhooks,

  stripe: {
    keyIn: "body",
    async sign(input) {
      const body = bodyOf(withValueAt(input.payload, "id", input.eventKey));
      // Stripe's SDK builds the header exactly as Stripe does; the API key is never used (no network).
      const signature = await new Stripe("sk_test_cli_signing_only").webhooks.generateTestHeaderStringAsync({
        payload: body,
        secret: input.secret,
        timestamp: unixSeconds(input.now),
      });
      return { body, headers: { ...json, "stripe-signature": signature, "user-agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)" } };
    },
  },

  github: {
    keyIn: "header",
    async sign(input) {
      const body = bodyOf(input.payload);
      return {
        body,
        headers: {
          ...json,
          "x-hub-signature-256": await octokitSign(input.secret, body),
          "x-github-delivery": input.eventKey,
          "x-github-event": "issues",
          "x-github-hook-id": "421337",
          "user-agent": "GitHub-Hookshot/cli",
        },
      };
    },
  },

  shopify: {
    keyIn: "header",
    sign(input) {
      const body = bodyOf(input.payload);
      return {
        body,
        headers: {
          ...json,
          "x-shopify-hmac-sha256": hmac("sha256", input.secret, body).toString("base64"),
          "x-shopify-webhook-id": input.eventKey,
          "x-shopify-event-id": `evt-${input.eventKey}`,
          "x-shopify-topic": "orders/create",
          "x-shopify-shop-domain": "acme-dev.myshopify.com",
          "x-shopify-api-version": "2026-01",
          "x-shopify-triggered-at": input.now.toISOString(),
        },
      };
    },
  },

  slack: {
    keyIn: "body",
    sign(input) {
      const body = bodyOf(withValueAt(input.payload, "event_id", input.eventKey));
      const timestamp = String(unixSeconds(input.now));
      return {
        body,
        headers: { ...json, "x-slack-signature": `v0=${hmac("sha256", input.secret, `v0:${timestamp}:`, body).toString("hex")}`, "x-slack-request-timestamp": timestamp },
      };
    },
  },

  twilio: {
    keyIn: "header",
    sign(input) {
      // Twilio posts form fields and signs the URL it called plus the sorted fields (its own helper does it).
      const params = /** @type {Record<string, string>} */ (typeof input.payload === "object" && input.payload !== null ? input.payload : {});
      const publicOrigin = typeof input.options.public_origin === "string" ? input.options.public_origin : undefined;
      const signedUrl = publicOrigin ? new URL(new URL(input.url).pathname + new URL(input.url).search, publicOrigin).toString() : input.url;
      return {
        body: new URLSearchParams(params).toString(),
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          "x-twilio-signature": twilioLibrary.getExpectedTwilioSignature(input.secret, signedUrl, params),
          "i-twilio-idempotency-token": input.eventKey,
        },
      };
    },
  },

  paddle: {
    keyIn: "body",
    sign(input) {
      const body = bodyOf(withValueAt(input.payload, "event_id", input.eventKey));
      const timestamp = unixSeconds(input.now);
      return { body, headers: { ...json, "paddle-signature": `ts=${timestamp};h1=${hmac("sha256", input.secret, `${timestamp}:`, body).toString("hex")}` } };
    },
  },

  linear: {
    keyIn: "header",
    sign(input) {
      // Linear's signed time is the body's webhookTimestamp (ms), checked within a minute.
      const body = bodyOf(withValueAt(input.payload, "webhookTimestamp", input.now.getTime()));
      const type = valueAt(input.payload, "type");
      return {
        body,
        headers: {
          ...json,
          "linear-signature": hmac("sha256", input.secret, body).toString("hex"),
          "linear-delivery": input.eventKey,
          "linear-event": typeof type === "string" ? type : "Issue",
        },
      };
    },
  },

  square: {
    keyIn: "body",
    sign(input) {
      const body = bodyOf(withValueAt(input.payload, "event_id", input.eventKey));
      // Square signs the notification URL as registered; behind a proxy the source names it.
      const notificationUrl = typeof input.options.notification_url === "string" ? input.options.notification_url : input.url;
      return { body, headers: { ...json, "x-square-hmacsha256-signature": hmac("sha256", input.secret, notificationUrl, body).toString("base64") } };
    },
  },

  twitch: {
    keyIn: "header",
    sign(input) {
      const body = bodyOf(input.payload);
      const timestamp = input.now.toISOString();
      const subscriptionType = valueAt(input.payload, "subscription.type");
      return {
        body,
        headers: {
          ...json,
          "twitch-eventsub-message-id": input.eventKey,
          "twitch-eventsub-message-timestamp": timestamp,
          "twitch-eventsub-message-signature": `sha256=${hmac("sha256", input.secret, input.eventKey, timestamp, body).toString("hex")}`,
          "twitch-eventsub-message-type": "notification",
          "twitch-eventsub-subscription-type": typeof subscriptionType === "string" ? subscriptionType : "channel.follow",
          "twitch-eventsub-subscription-version": "2",
        },
      };
    },
  },

  zoom: {
    keyIn: "payload-hash",
    sign(input) {
      // Zoom sends no event id: a fresh event_ts makes each send a new event, as each real one is.
      const body = bodyOf(withValueAt(input.payload, "event_ts", input.now.getTime()));
      const timestamp = String(unixSeconds(input.now));
      return { body, headers: { ...json, "x-zm-signature": `v0=${hmac("sha256", input.secret, `v0:${timestamp}:`, body).toString("hex")}`, "x-zm-request-timestamp": timestamp } };
    },
  },

  gitlab: {
    keyIn: "header",
    sign(input) {
      const body = bodyOf(input.payload);
      const kind = valueAt(input.payload, "object_kind");
      return {
        body,
        headers: {
          ...json,
          // GitLab sends its secret token itself rather than a signature.
          "x-gitlab-token": input.secret,
          "idempotency-key": input.eventKey,
          "x-gitlab-event-uuid": `uuid-${input.eventKey}`,
          "x-gitlab-event": kind === "push" ? "Push Hook" : kind === "issue" ? "Issue Hook" : "Merge Request Hook",
        },
      };
    },
  },

  intercom: {
    keyIn: "body",
    sign(input) {
      const body = bodyOf(withValueAt(input.payload, "id", input.eventKey));
      return { body, headers: { ...json, "x-hub-signature": `sha1=${hmac("sha1", input.secret, body).toString("hex")}` } };
    },
  },

  mailgun: {
    keyIn: "body",
    sign(input) {
      // Mailgun's signature sits in the body: HMAC-SHA256 of timestamp ‖ token, next to the event data. The signed
      // token is the receiver's key for Mailgun, so the event key is the token (and event-data.id, as Mailgun's).
      const timestamp = String(unixSeconds(input.now));
      const token = input.eventKey;
      const signature = { timestamp, token, signature: hmac("sha256", input.secret, timestamp, token).toString("hex") };
      const body = bodyOf(withValueAt(withValueAt(input.payload, "event-data.id", input.eventKey), "signature", signature));
      return { body, headers: json };
    },
  },

  sendgrid: {
    keyIn: "payload-hash",
    asymmetric: true,
    sign(input) {
      // A batch carries no id: fresh sg_event_ids make each send a new batch, as each real one is.
      const events = Array.isArray(input.payload)
        ? input.payload.map((event, index) => ({ ...event, sg_event_id: `${input.eventKey}-${index + 1}`, timestamp: unixSeconds(input.now) }))
        : input.payload;
      const body = bodyOf(events);
      const timestamp = String(unixSeconds(input.now));
      // ECDSA P-256 over timestamp ‖ body; node:crypto encodes it as DER, as SendGrid sends it.
      const signature = cryptoSign("sha256", Buffer.from(timestamp + body), privateKeyObject(input.privateKey(), input.secretName));
      return {
        body,
        headers: { ...json, "x-twilio-email-event-webhook-signature": signature.toString("base64"), "x-twilio-email-event-webhook-timestamp": timestamp },
      };
    },
  },

  ed25519: discordLike(),
  discord: discordLike(),

  generic: {
    keyIn: "header",
    sign: signGeneric,
  },
};

/** @returns {Scheme} */
function discordLike() {
  return {
    keyIn: "body",
    asymmetric: true,
    sign(input) {
      const body = bodyOf(withValueAt(input.payload, "id", input.eventKey));
      const timestamp = String(unixSeconds(input.now));
      return { body, headers: { ...json, "x-signature-ed25519": ed25519Signature(input, timestamp, body).toString("hex"), "x-signature-timestamp": timestamp } };
    },
  };
}

/**
 * The generic adapter's scheme is whatever the source's table says: build the signed content from its template
 * and encode the signature the way it expects.
 * @param {SignInput} input
 */
function signGeneric(input) {
  const option = (/** @type {string} */ name) => (typeof input.options[name] === "string" ? /** @type {string} */ (input.options[name]) : undefined);
  const keyPath = option("event_key_path");
  const body = bodyOf(keyPath ? withValueAt(input.payload, keyPath, input.eventKey) : input.payload);
  const timestamp = option("timestamp_unit") === "ms" ? String(input.now.getTime()) : String(unixSeconds(input.now));
  const values = { body, timestamp, id: input.eventKey, url: input.url };
  const content = (option("signed_content") ?? "{body}").replace(/\{([a-z_]+)\}/g, (_, name) => values[/** @type {keyof typeof values} */ (name)] ?? "");
  const algorithm = option("algorithm") ?? "hmac-sha256";
  let raw;
  if (algorithm === "ed25519") raw = ed25519Signature(input, content);
  else {
    const secretEncoding = option("secret_encoding") ?? "utf8";
    const key = secretEncoding === "base64" || secretEncoding === "hex" ? Buffer.from(input.secret, secretEncoding) : Buffer.from(input.secret, "utf8");
    raw = hmac(algorithm.replace("hmac-", ""), key, content);
  }
  const encoding = /** @type {BufferEncoding} */ (option("encoding") ?? "hex");
  /** @type {Record<string, string>} */
  const headers = { ...json, [option("signature_header") ?? "x-signature"]: `${option("signature_prefix") ?? ""}${raw.toString(encoding)}` };
  const idHeader = option("id_header");
  if (idHeader) headers[idHeader] = input.eventKey;
  const eventKeyHeader = option("event_key_header");
  if (eventKeyHeader) headers[eventKeyHeader] = input.eventKey;
  const timestampHeader = option("timestamp_header");
  if (timestampHeader) headers[timestampHeader] = timestamp;
  return { body, headers };
}

/** The provider's scheme, following the receiver's aliases. */
export function schemeFor(/** @type {string} */ provider) {
  const scheme = schemes[provider];
  if (!scheme) throw new CliError(`no signer for provider ${JSON.stringify(provider)}: known providers are ${Object.keys(schemes).join(", ")}`);
  return scheme;
}

/** For messages about payload-hash providers: the key the receiver will compute. */
export const payloadHash = (/** @type {string} */ body) => createHash("sha256").update(body).digest("hex");
