// One signer per scheme, as the real sender signs, so `send` exercises the receiver's own verification. Where
// the test suite signs with the provider's SDK (Stripe, GitHub/Octokit, Standard Webhooks, Twilio) this does too;
// the others follow each provider's documented recipe with node:crypto: here, in app-signers.mjs, and for the
// senders the receiver reads as tables, in preset-signers.mjs. `schemeFor` picks one for every provider name.
import { createHash, createHmac, createPrivateKey, sign as cryptoSign } from "node:crypto";
import { sign as octokitSign } from "@octokit/webhooks-methods";
import { Webhook as StandardWebhook } from "standardwebhooks";
import { appSchemes } from "./app-signers.mjs";
import { CliError, EXIT } from "./errors.mjs";
import { bodyOf, valueAt, withValueAt } from "./payload.mjs";
import { handshakeSecret, presetSpecs, signAsSpec } from "./preset-signers.mjs";

export { withValueAt };

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
 * @typedef {{ body: string, headers: Record<string, string>, eventKey?: string, keptFingerprint?: string }} SignedRequest
 *   `eventKey`: the key the receiver will record, when it is neither the id sent nor the body's SHA-256;
 *   `keptFingerprint`: for senders that hand their secret over, the fingerprint of the one handed over
 * @typedef {{ keyIn: "header" | "body" | "payload-hash", asymmetric?: boolean, sign(input: SignInput): SignedRequest | Promise<SignedRequest> }} Scheme
 */

const json = { "content-type": "application/json" };
const unixSeconds = (/** @type {Date} */ now) => Math.floor(now.getTime() / 1000);
const hmac = (
  /** @type {string} */ algorithm,
  /** @type {string | Buffer} */ key,
  /** @type {(string | Buffer)[]} */ ...parts
) => {
  const mac = createHmac(algorithm, key);
  for (const part of parts) mac.update(part);
  return mac.digest();
};

function privateKeyObject(/** @type {string} */ text, /** @type {string} */ secretName) {
  try {
    return text.includes("BEGIN")
      ? createPrivateKey(text)
      : createPrivateKey({ key: Buffer.from(text, "base64"), format: "der", type: "pkcs8" });
  } catch {
    throw new CliError(
      `${secretName}_PRIVATE_KEY is not a PKCS#8 private key: make a pair with npm run cli -- secret ed25519 ${secretName} (or p256)`,
      EXIT.setup,
    );
  }
}

const ed25519Signature = (/** @type {SignInput} */ input, /** @type {(string | Buffer)[]} */ ...parts) =>
  cryptoSign(
    null,
    Buffer.concat(parts.map((part) => Buffer.from(part))),
    privateKeyObject(input.privateKey(), input.secretName),
  );

/** Standard Webhooks senders that deliver through Svix, under svix-* header names. */
const SVIX_SENDERS = new Set(["svix", "clerk", "resend"]);

/** @type {Scheme} */
const standardWebhooks = {
  keyIn: "header",
  sign(input) {
    const body = bodyOf(input.payload);
    const timestamp = String(unixSeconds(input.now));
    // Svix sends the same scheme under svix-* names; a whpk_ "secret" means the sender signs with Ed25519 (v1a).
    const prefix = SVIX_SENDERS.has(String(input.options.provider)) ? "svix" : "webhook";
    const signature = input.secret.startsWith("whpk_")
      ? `v1a,${ed25519Signature(input, `${input.eventKey}.${timestamp}.`, body).toString("base64")}`
      : new StandardWebhook(input.secret).sign(input.eventKey, input.now, body);
    return {
      body,
      headers: {
        ...json,
        [`${prefix}-id`]: input.eventKey,
        [`${prefix}-timestamp`]: timestamp,
        [`${prefix}-signature`]: signature,
      },
    };
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
      // Imported here, not above: Stripe's SDK costs about half a CPU-second to load, and Twilio's more, on every
      // send to any provider.
      const { default: Stripe } = await import("stripe");
      const signature = await new Stripe("sk_test_cli_signing_only").webhooks.generateTestHeaderStringAsync({
        payload: body,
        secret: input.secret,
        timestamp: unixSeconds(input.now),
      });
      return {
        body,
        headers: {
          ...json,
          "stripe-signature": signature,
          "user-agent": "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
        },
      };
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
        headers: {
          ...json,
          "x-slack-signature": `v0=${hmac("sha256", input.secret, `v0:${timestamp}:`, body).toString("hex")}`,
          "x-slack-request-timestamp": timestamp,
        },
      };
    },
  },

  twilio: {
    keyIn: "header",
    async sign(input) {
      const { default: twilioLibrary } = await import("twilio");
      // Twilio posts form fields and signs the URL it called plus the sorted fields (its own helper does it).
      const params = /** @type {Record<string, string>} */ (
        typeof input.payload === "object" && input.payload !== null ? input.payload : {}
      );
      const publicOrigin = typeof input.options.public_origin === "string" ? input.options.public_origin : undefined;
      const signedUrl = publicOrigin
        ? new URL(new URL(input.url).pathname + new URL(input.url).search, publicOrigin).toString()
        : input.url;
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
      return {
        body,
        headers: {
          ...json,
          "paddle-signature": `ts=${timestamp};h1=${hmac("sha256", input.secret, `${timestamp}:`, body).toString("hex")}`,
        },
      };
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
      const notificationUrl =
        typeof input.options.notification_url === "string" ? input.options.notification_url : input.url;
      return {
        body,
        headers: {
          ...json,
          "x-square-hmacsha256-signature": hmac("sha256", input.secret, notificationUrl, body).toString("base64"),
        },
      };
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
          "twitch-eventsub-subscription-type":
            typeof subscriptionType === "string" ? subscriptionType : "channel.follow",
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
      return {
        body,
        headers: {
          ...json,
          "x-zm-signature": `v0=${hmac("sha256", input.secret, `v0:${timestamp}:`, body).toString("hex")}`,
          "x-zm-request-timestamp": timestamp,
        },
      };
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
      return {
        body,
        headers: { ...json, "x-hub-signature": `sha1=${hmac("sha1", input.secret, body).toString("hex")}` },
      };
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
      const body = bodyOf(
        withValueAt(withValueAt(input.payload, "event-data.id", input.eventKey), "signature", signature),
      );
      return { body, headers: json };
    },
  },

  sendgrid: {
    keyIn: "payload-hash",
    asymmetric: true,
    sign(input) {
      // A batch carries no id: fresh sg_event_ids make each send a new batch, as each real one is.
      const events = Array.isArray(input.payload)
        ? input.payload.map((event, index) => ({
            ...event,
            sg_event_id: `${input.eventKey}-${index + 1}`,
            timestamp: unixSeconds(input.now),
          }))
        : input.payload;
      const body = bodyOf(events);
      const timestamp = String(unixSeconds(input.now));
      // ECDSA P-256 over timestamp ‖ body; node:crypto encodes it as DER, as SendGrid sends it.
      const signature = cryptoSign(
        "sha256",
        Buffer.from(timestamp + body),
        privateKeyObject(input.privateKey(), input.secretName),
      );
      return {
        body,
        headers: {
          ...json,
          "x-twilio-email-event-webhook-signature": signature.toString("base64"),
          "x-twilio-email-event-webhook-timestamp": timestamp,
        },
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
      return {
        body,
        headers: {
          ...json,
          "x-signature-ed25519": ed25519Signature(input, timestamp, body).toString("hex"),
          "x-signature-timestamp": timestamp,
        },
      };
    },
  };
}

/**
 * The generic adapter's scheme is whatever the source's table says: build the signed content from its template
 * and encode the signature the way it expects.
 * @param {SignInput} input
 */
function signGeneric(input) {
  const option = (/** @type {string} */ name) =>
    typeof input.options[name] === "string" ? /** @type {string} */ (input.options[name]) : undefined;
  const keyPath = option("event_key_path");
  const body = bodyOf(keyPath ? withValueAt(input.payload, keyPath, input.eventKey) : input.payload);
  const timestamp = option("timestamp_unit") === "ms" ? String(input.now.getTime()) : String(unixSeconds(input.now));
  const values = { body, timestamp, id: input.eventKey, url: input.url };
  const content = (option("signed_content") ?? "{body}").replace(
    /\{([a-z_]+)\}/g,
    (_, name) => values[/** @type {keyof typeof values} */ (name)] ?? "",
  );
  const algorithm = option("algorithm") ?? "hmac-sha256";
  let raw;
  if (algorithm === "ed25519") raw = ed25519Signature(input, content);
  else {
    const secretEncoding = option("secret_encoding") ?? "utf8";
    const key =
      secretEncoding === "base64" || secretEncoding === "hex"
        ? Buffer.from(input.secret, secretEncoding)
        : Buffer.from(input.secret, "utf8");
    raw = hmac(algorithm.replace("hmac-", ""), key, content);
  }
  const encoding = /** @type {BufferEncoding} */ (option("encoding") ?? "hex");
  /** @type {Record<string, string>} */
  const headers = {
    ...json,
    [option("signature_header") ?? "x-signature"]: `${option("signature_prefix") ?? ""}${raw.toString(encoding)}`,
  };
  const idHeader = option("id_header");
  if (idHeader) headers[idHeader] = input.eventKey;
  const eventKeyHeader = option("event_key_header");
  if (eventKeyHeader) headers[eventKeyHeader] = input.eventKey;
  const timestampHeader = option("timestamp_header");
  if (timestampHeader) headers[timestampHeader] = timestamp;
  return { body, headers };
}

/** Names the receiver reads with another provider's scheme (src/providers/registry.ts, providerAliases). */
const ALIASES = /** @type {Record<string, string>} */ ({
  clerk: "standard-webhooks",
  resend: "standard-webhooks",
  brex: "standard-webhooks",
  openai: "standard-webhooks",
  whatsapp: "meta",
  instagram: "meta",
  messenger: "meta",
});

/**
 * Senders whose deliveries only the sender can sign: the receiver verifies them with a key it fetches from the
 * sender's own pinned hosts, so no local key can stand in without opening that pin.
 */
const SIGNED_BY_THE_SENDER_ONLY = /** @type {Record<string, (options: Record<string, unknown>) => string>} */ ({
  "aws-sns": () =>
    "aws-sns messages are signed by Amazon's own certificate, which the receiver fetches from https://sns.<region>.amazonaws.com (and nowhere else), so only AWS can sign one it accepts: subscribe a real SNS topic to a tunnel to this receiver, or run npx vitest run test/providers/aws-sns.test.ts (its Worker is pointed at a stand-in certificate host)",
  plaid: (options) =>
    `plaid deliveries are signed by Plaid's own key, which the receiver fetches from https://${options.environment === "sandbox" ? "sandbox" : "production"}.plaid.com/webhook_verification_key/get (and nowhere else), so only Plaid can sign one it accepts: fire one with Plaid's sandbox /sandbox/item/fire_webhook at a tunnel to this receiver, or run npx vitest run test/providers/plaid.test.ts (its Worker is pointed at a stand-in key host)`,
});

/**
 * Where a sender that sends no id puts something unique to the event: the event key is written there, so every
 * send is a new payload (the receiver keys these by the payload's SHA-256) and the same `--id` is a duplicate.
 */
const UNIQUE_FIELD = /** @type {Record<string, string>} */ ({
  hubspot: "0.eventId",
  calendly: "payload.uuid",
  lemonsqueezy: "data.attributes.identifier",
  docusign: "data.envelopeId",
  dropbox: "list_folder.accounts.0",
  postmark: "MessageID",
  asana: "events.0.resource.gid",
  meta: "entry.0.changes.0.value.id",
  whatsapp: "entry.0.changes.0.value.messages.0.id",
  instagram: "entry.0.messaging.0.message.mid",
  messenger: "entry.0.messaging.0.message.mid",
  netlify: "id",
  "microsoft-graph": "value.0.resourceData.id",
});

/**
 * The scheme `send` signs with for this provider: written out above or in app-signers.mjs, or read from the
 * receiver's own preset table.
 * @param {string} provider
 * @param {Record<string, unknown>} options the source's table
 * @returns {Promise<Scheme>}
 */
export async function schemeFor(provider, options = {}) {
  const unsendable = SIGNED_BY_THE_SENDER_ONLY[provider];
  if (unsendable) throw new CliError(unsendable(options));
  const named = ALIASES[provider] ?? provider;
  const written = schemes[named] ?? appSchemes[named];
  if (written) return UNIQUE_FIELD[provider] ? withUniqueField(written, UNIQUE_FIELD[provider]) : written;
  const spec = (await presetSpecs()).get(named);
  if (!spec) {
    throw new CliError(
      `provider ${JSON.stringify(provider)} is not one the receiver verifies: npm run cli -- check names the close ones, and docs/providers.md lists them all`,
      EXIT.setup,
    );
  }
  return presetScheme(spec, UNIQUE_FIELD[provider]);
}

/** @returns {Scheme} */
function withUniqueField(/** @type {Scheme} */ scheme, /** @type {string} */ path) {
  return {
    ...scheme,
    sign: (input) => scheme.sign({ ...input, payload: withValueAt(input.payload, path, input.eventKey) }),
  };
}

/** @returns {Scheme} */
function presetScheme(
  /** @type {import("./preset-signers.mjs").Spec} */ spec,
  /** @type {string | undefined} */ uniqueField,
) {
  return {
    keyIn: spec.eventKey?.header ? "header" : spec.eventKey ? "body" : "payload-hash",
    async sign(input) {
      const path = spec.eventKey?.path ?? uniqueField;
      // Where the sample holds a number (Telegram's update_id, HubSpot's eventId), the key goes in as one.
      const asSampleHasIt = (/** @type {unknown} */ sampled) =>
        typeof sampled === "number" && /^\d+$/.test(input.eventKey) ? Number(input.eventKey) : input.eventKey;
      const payload = path
        ? withValueAt(input.payload, path, asSampleHasIt(valueAt(input.payload, path)))
        : input.payload;
      const handedOver =
        spec.provider === "asana" || spec.provider === "notion"
          ? await handshakeSecret(spec.provider, input)
          : undefined;
      const signed = signAsSpec(spec, input, { body: bodyOf(payload), secret: handedOver?.secret });
      return { ...signed, keptFingerprint: handedOver?.fingerprint };
    },
  };
}

/** For messages about payload-hash providers: the key the receiver will compute. */
export const payloadHash = (/** @type {string} */ body) => createHash("sha256").update(body).digest("hex");
