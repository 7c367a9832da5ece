import { stringAtPath, valueAtPath } from "./json";
import { keptSecretAdapter } from "./kept-secret";
import { type PresetSpec, presetAdapter } from "./presets";
import { parseUnverifiedJson } from "./unverified";

/** The delivery scheme as data, also read by the CLI's `send` to sign the same way (scripts/cli/signers.mjs). */
export const notionSpec: PresetSpec = {
  provider: "notion",
  signatureHeader: "x-notion-signature",
  algorithm: "hmac-sha256",
  encoding: "hex",
  prefix: "sha256=",
  signs: ["body"],
  eventKey: { path: "id" },
  type: { path: "type" },
  subjectPath: "entity.id",
  occurredAtPath: "timestamp",
  keptHeaders: ["content-type", "user-agent"],
};
const delivery = presetAdapter(notionSpec);

/**
 * Notion: creating a subscription POSTs `{"verification_token": "secret_…"}`, unsigned; the operator pastes that
 * token back into Notion, and it then keys `X-Notion-Signature: sha256=<hex>` (HMAC-SHA256 over the body). The
 * handshake is proven by the URL's `verify_token`; the token is kept (and readable with the SQL in the docs).
 * The key is the event `id`.
 */
export const notion = keptSecretAdapter(
  delivery,
  (input) => {
    if (input.headers.has("x-notion-signature")) return null;
    const payload = parseUnverifiedJson(input.rawBody);
    if (valueAtPath(payload, "verification_token") === undefined) return null;
    return stringAtPath(payload, "verification_token") ?? "";
  },
  () => Response.json({}),
);
