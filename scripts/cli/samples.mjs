// Bundled sample payloads, one realistic event per provider (examples/samples/<provider>.json), as `stripe
// trigger` has. `send` accepts a sample's name or any file; the signer writes a fresh id into each send.
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { basename, join } from "node:path";
import { fileURLToPath } from "node:url";
import { randomUUID } from "node:crypto";
import { CliError } from "./errors.mjs";

const EXAMPLES = fileURLToPath(new URL("../../examples/", import.meta.url));
const SAMPLES = join(EXAMPLES, "samples");

export function sampleNames() {
  return readdirSync(SAMPLES).filter((name) => name.endsWith(".json")).map((name) => basename(name, ".json")).sort();
}

/**
 * The payload to send: a file path as given, else a bundled sample by name (examples/samples/<name>.json, then
 * examples/<name>.json such as the demo's `credit`), else the provider's own sample.
 * @param {string} provider
 * @param {string | undefined} sampleOrFile
 * @returns {{ payload: unknown, from: string }}
 */
export function loadSample(provider, sampleOrFile) {
  const candidates = sampleOrFile === undefined
    ? [join(SAMPLES, `${provider}.json`)]
    : [sampleOrFile, join(SAMPLES, `${sampleOrFile}.json`), join(EXAMPLES, `${sampleOrFile}.json`)];
  const path = candidates.find((candidate) => existsSync(candidate));
  if (!path) {
    throw new CliError(
      sampleOrFile === undefined
        ? `no bundled sample for provider ${provider}: pass a file, e.g. send <source> ./event.json`
        : `no file or sample named ${sampleOrFile}: samples are ${sampleNames().join(", ")}`,
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
const ID_PREFIXES = /** @type {Record<string, string>} */ ({ stripe: "evt_", paddle: "evt_", slack: "Ev", intercom: "notif_", svix: "msg_", "standard-webhooks": "msg_" });

export function freshEventKey(/** @type {string} */ provider) {
  const random = randomUUID().replace(/-/g, "");
  return `${ID_PREFIXES[provider] ?? ""}${provider === "twilio" || provider === "github" || provider === "twitch" ? randomUUID() : random.slice(0, 24)}`;
}
