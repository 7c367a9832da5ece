// Senders the receiver reads as data (src/providers/presets.ts, and the delivery specs of Okta, Asana and Notion):
// one signer reads the same tables and signs as each sender documents it, so a sender added as a table entry can
// be sent locally with no code here. Asana and Notion hand their signing secret over in a handshake first.
import { createHash, createHmac } from "node:crypto";
import { join } from "node:path";
import { CliError } from "./errors.mjs";
import { postWebhook } from "./http.mjs";

const ROOT = join(import.meta.dirname, "..", "..");

/**
 * @typedef {import("./signers.mjs").SignInput} SignInput
 * @typedef {import("./signers.mjs").Scheme} Scheme
 * @typedef {{ provider: string, signatureHeader: string | string[], algorithm: string, encoding: BufferEncoding, prefix?: string,
 *   list?: { entries: string, pair: string, signature: string, timestamp?: string }, timestampHeader?: string,
 *   timestampFormat?: "unix-s" | "unix-ms" | "rfc3339", signs: (string | { literal: string })[], secretEncoding?: "utf8" | "hex" | "base64",
 *   basicAuth?: boolean, eventKey?: { header?: string, path?: string }, type?: { header?: string }, urlDecodes?: string[] }} Spec
 */

/** @type {Promise<Map<string, Spec>> | undefined} */
let loaded;

/** The receiver's own tables, bundled on the fly as `check` bundles the source registry. */
export function presetSpecs() {
  loaded ??= (async () => {
    const { build } = await import("esbuild");
    const result = await build({
      stdin: {
        contents: [
          'export { presets } from "./src/providers/presets.ts";',
          'export { oktaSpec } from "./src/providers/okta.ts";',
          'export { asanaSpec } from "./src/providers/asana.ts";',
          'export { notionSpec } from "./src/providers/notion.ts";',
        ].join("\n"),
        resolveDir: ROOT,
        loader: "ts",
      },
      bundle: true,
      write: false,
      format: "esm",
      platform: "node",
      logLevel: "silent",
    });
    const tables = await import(
      `data:text/javascript;base64,${Buffer.from(result.outputFiles[0].text).toString("base64")}`
    );
    /** @type {Spec[]} */
    const specs = [...tables.presets, tables.oktaSpec, tables.asanaSpec, tables.notionSpec];
    return new Map(specs.map((spec) => [spec.provider, spec]));
  })();
  return loaded;
}

/**
 * What each sample's sender puts in headers besides the signature: the topic or event name the adapter reads as
 * the type, and the correlation headers a real delivery carries.
 * @type {Record<string, (now: Date) => Record<string, string>>}
 */
const SENDER_HEADERS = {
  woocommerce: () => ({
    "x-wc-webhook-topic": "order.created",
    "x-wc-webhook-resource": "order",
    "x-wc-webhook-event": "created",
    "x-wc-webhook-id": "12",
    "x-wc-webhook-source": "https://shop.example.com/",
    "user-agent": "WooCommerce/9.4.2 Hookshot (WordPress/6.7.1)",
  }),
  sentry: (now) => ({
    "sentry-hook-resource": "issue",
    "sentry-hook-timestamp": String(Math.floor(now.getTime() / 1000)),
    "user-agent": "sentry",
  }),
  lemonsqueezy: () => ({ "x-event-name": "order_created" }),
  bitbucket: () => ({
    "x-event-key": "repo:push",
    "x-hook-uuid": "{9f2c1e55-3b7a-4d0e-8c11-2a6f4e9b7d10}",
    "x-attempt-number": "1",
    "user-agent": "Bitbucket-Webhooks/2.0",
  }),
  zendesk: () => ({ "x-zendesk-webhook-id": "01JDZ8Q4M0N5V7R2K3T6W9Y1XB", "user-agent": "Zendesk Webhook" }),
  pagerduty: () => ({
    "x-webhook-id": "0c1a8b1f-5a43-4e68-9f0e-2b6f0f5c7e21",
    "x-webhook-subscription": "PSUB123",
    "user-agent": "PagerDuty-Webhook/V3.0",
  }),
  razorpay: () => ({ "user-agent": "Razorpay-Webhook/v1" }),
  box: () => ({ "user-agent": "Box-WH-Client/0.1" }),
  hubspot: () => ({ "user-agent": "HubSpot Connect 2.0 (http://dev.hubspot.com/)" }),
  okta: () => ({ "user-agent": "Okta Event Hooks" }),
};

/** The URL with only the listed characters' percent-encodings decoded, as HubSpot v3 signs it. */
function decodingOnly(/** @type {string} */ url, /** @type {string[] | undefined} */ characters) {
  if (!characters?.length) return url;
  const decoded = new Map(
    characters.map((character) => [character.charCodeAt(0).toString(16).toUpperCase().padStart(2, "0"), character]),
  );
  return url.replace(/%([0-9A-Fa-f]{2})/g, (encoding, hex) => decoded.get(hex.toUpperCase()) ?? encoding);
}

function keyBytes(/** @type {Spec} */ spec, /** @type {string} */ secret) {
  return spec.secretEncoding === "hex" || spec.secretEncoding === "base64"
    ? Buffer.from(secret, spec.secretEncoding)
    : Buffer.from(secret, "utf8");
}

/**
 * Signs `body` as the spec's sender does; answers the request and the key the receiver will record.
 * @param {Spec} spec
 * @param {SignInput} input
 * @param {{ body: string, secret?: string }} prepared the body with the event key written in, and the signing secret when it is not the listed one
 */
export function signAsSpec(spec, input, prepared) {
  const { body } = prepared;
  const secret = prepared.secret ?? input.secret;
  const timestampText =
    spec.timestampFormat === "unix-ms"
      ? String(input.now.getTime())
      : spec.timestampFormat === "rfc3339"
        ? input.now.toISOString()
        : String(Math.floor(input.now.getTime() / 1000));
  /** @type {Record<string, string>} */
  const headers = { "content-type": "application/json", ...(SENDER_HEADERS[spec.provider]?.(input.now) ?? {}) };
  const signatureHeader = typeof spec.signatureHeader === "string" ? spec.signatureHeader : spec.signatureHeader[0];
  if (spec.algorithm === "token") {
    headers[signatureHeader] = spec.basicAuth ? `Basic ${Buffer.from(secret, "utf8").toString("base64")}` : secret;
  } else {
    const signedUrl = typeof input.options.public_url === "string" ? input.options.public_url : input.url;
    const mac = createHmac(spec.algorithm.replace("hmac-", ""), keyBytes(spec, secret));
    for (const part of spec.signs) {
      if (typeof part === "object") mac.update(part.literal);
      else
        mac.update(
          part === "body"
            ? body
            : part === "timestamp"
              ? timestampText
              : part === "method"
                ? "POST"
                : part === "url"
                  ? decodingOnly(signedUrl, spec.urlDecodes)
                  : "",
        );
    }
    const signature = `${spec.prefix ?? ""}${mac.digest().toString(spec.encoding)}`;
    headers[signatureHeader] = spec.list
      ? [
          ...(spec.list.timestamp ? [`${spec.list.timestamp}${spec.list.pair}${timestampText}`] : []),
          `${spec.list.signature}${spec.list.pair}${signature}`,
        ].join(spec.list.entries)
      : signature;
    if (spec.timestampHeader) headers[spec.timestampHeader] = timestampText;
  }
  if (spec.eventKey?.header) headers[spec.eventKey.header] = input.eventKey;
  // No id from the sender: the receiver keys the delivery by the payload's SHA-256.
  const eventKey = spec.eventKey ? input.eventKey : createHash("sha256").update(body).digest("hex");
  return { body, headers, eventKey };
}

/**
 * Asana and Notion sign with a secret they hand over in a handshake, proven by the URL's `verify_token` (the
 * secret the source lists). `send` hands one over first, derived from that token so every send hands over the same
 * one (a second, different secret would wait as pending until approved), then signs with it.
 * @param {"asana" | "notion"} provider
 */
export async function handshakeSecret(provider, /** @type {SignInput} */ input) {
  const derived = createHmac("sha256", input.secret).update(`receiver cli send: ${provider} handshake`).digest("hex");
  const handedOver = provider === "notion" ? `secret_${derived}` : derived;
  const url = `${input.url}?verify_token=${encodeURIComponent(input.secret)}`;
  /** @type {{ body: string, headers: Record<string, string> }} */
  const request =
    provider === "asana"
      ? { body: "", headers: { "x-hook-secret": handedOver } }
      : { body: JSON.stringify({ verification_token: handedOver }), headers: { "content-type": "application/json" } };
  const answer = await postWebhook(url, request);
  if (answer.status !== 200) {
    throw new CliError(
      `the ${provider} handshake (POST ?verify_token=<${input.secretName}>) was answered ${answer.status}: is ${input.secretName} in .dev.vars the value the running receiver loaded? Restart npm start after editing it`,
    );
  }
  return { secret: handedOver, fingerprint: createHash("sha256").update(handedOver).digest("hex").slice(0, 16) };
}
