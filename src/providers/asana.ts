import { keptSecretAdapter } from "./kept-secret";
import { type PresetSpec, presetAdapter } from "./presets";
import { readHeader } from "./signed";

/** The delivery scheme as data, also read by the CLI's `send` to sign the same way (scripts/cli/signers.mjs). */
export const asanaSpec: PresetSpec = {
  provider: "asana",
  signatureHeader: "x-hook-signature",
  algorithm: "hmac-sha256",
  encoding: "hex",
  signs: ["body"],
  type: { path: "events.0.resource.resource_type", join: "events.0.action" },
  subjectPath: "events.0.resource.gid",
  occurredAtPath: "events.0.created_at",
  keptHeaders: ["content-type", "user-agent"],
};
const delivery = presetAdapter(asanaSpec);

/**
 * Asana: establishing a webhook POSTs `X-Hook-Secret: <secret>`, to be echoed in the same response header; later
 * deliveries carry `X-Hook-Signature: <hex>`, HMAC-SHA256 over the body keyed by that secret. The handshake is
 * proven by the URL's `verify_token`, and the secret is kept so the deliveries verify. A delivery batches
 * `events[]` with no id: the key is the payload's SHA-256. Asana's heartbeat (`{"events": []}`) is an event too.
 */
export const asana = keptSecretAdapter(
  delivery,
  (input) => (input.headers.has("x-hook-secret") ? (readHeader(input.headers, "x-hook-secret") ?? "") : null),
  (secret) => new Response(null, { status: 200, headers: { "x-hook-secret": secret } }),
);
