// Bundled sample payloads, one realistic event per provider (examples/samples/<provider>.json), as `stripe
// trigger` has. `send` accepts a sample's name or any file; the signer writes a fresh id into each send.

import { randomInt, randomUUID } from "node:crypto";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { basename, join } from "node:path";
import { CliError, EXIT } from "./errors.mjs";

const EXAMPLES = join(import.meta.dirname, "..", "..", "examples");
const SAMPLES = join(EXAMPLES, "samples");

/** Every name `send` takes: the per-provider samples, then the demo's own events in examples/ (credit, plan-changed). */
export function sampleNames() {
  const jsonNames = (/** @type {string} */ dir) =>
    readdirSync(dir)
      .filter((name) => name.endsWith(".json"))
      .map((name) => basename(name, ".json"))
      .sort();
  return [...jsonNames(SAMPLES), ...jsonNames(EXAMPLES)];
}

/**
 * The payload to send: a file path as given, else a bundled sample by name (examples/samples/<name>.json, then
 * examples/<name>.json such as the demo's `credit`), else the provider's own sample.
 * @param {string} provider
 * @param {string | undefined} sampleOrFile
 * @returns {{ payload: unknown, from: string }}
 */
export function loadSample(provider, sampleOrFile) {
  const candidates =
    sampleOrFile === undefined
      ? [join(SAMPLES, `${provider}.json`)]
      : [sampleOrFile, join(SAMPLES, `${sampleOrFile}.json`), join(EXAMPLES, `${sampleOrFile}.json`)];
  const path = candidates.find((candidate) => existsSync(candidate));
  if (!path) {
    throw new CliError(
      sampleOrFile === undefined
        ? `no bundled sample for provider ${provider}: pass a file, e.g. send <source> ./event.json`
        : `no file or sample named ${sampleOrFile}: samples are ${sampleNames().join(", ")}`,
      EXIT.notFound,
    );
  }
  const text = readFileSync(path, "utf8");
  try {
    return { payload: JSON.parse(text), from: path };
  } catch {
    // Not JSON (a form body, say): sent byte for byte, with no id written into it.
    return { payload: text, from: path };
  }
}

/** Ids shaped like each provider's own, so receipts read naturally in `tail` and `show`. */
const ID_PREFIXES = /** @type {Record<string, string>} */ ({
  stripe: "evt_",
  paddle: "evt_",
  slack: "Ev",
  intercom: "notif_",
  svix: "msg_",
  "standard-webhooks": "msg_",
  clerk: "msg_",
  resend: "msg_",
  brex: "msg_",
  openai: "msg_",
  razorpay: "evt_",
  whatsapp: "wamid.",
  instagram: "aWdfZAG1f",
  messenger: "m_",
  dropbox: "dbid:",
});
/** Senders whose ids are UUIDs. */
const UUID_IDS = new Set([
  "twilio",
  "github",
  "twitch",
  "okta",
  "monday",
  "zendesk",
  "sentry",
  "bitbucket",
  "mux",
  "notion",
  "calendly",
  "docusign",
  "lemonsqueezy",
  "coinbase-commerce",
  "netlify",
]);
/** Senders whose ids are numbers (the receiver reads Telegram's update_id as one). */
const NUMERIC_IDS = new Set(["telegram", "hubspot", "woocommerce", "asana"]);

export function freshEventKey(/** @type {string} */ provider) {
  if (UUID_IDS.has(provider)) return randomUUID();
  if (NUMERIC_IDS.has(provider)) return String(1_000_000_000 + randomInt(1_000_000_000));
  return `${ID_PREFIXES[provider] ?? ""}${randomUUID().replace(/-/g, "").slice(0, 24)}`;
}
