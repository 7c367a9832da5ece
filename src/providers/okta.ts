import { challengeText, handshake, tokenMatches, withHandshake } from "./handshake";
import { type PresetSpec, presetAdapter } from "./presets";
import { readHeader, rejected } from "./signed";

/** The delivery scheme as data, also read by the CLI's `send` to sign the same way (scripts/cli/signers.mjs). */
export const oktaSpec: PresetSpec = {
  provider: "okta",
  signatureHeader: "authorization",
  algorithm: "token",
  encoding: "hex",
  signs: [],
  eventKey: { path: "eventId" },
  type: { path: "data.events.0.eventType" },
  subjectPath: "data.events.0.target.0.id",
  occurredAtPath: "eventTime",
  keptHeaders: ["content-type", "user-agent"],
};
const delivery = presetAdapter(oktaSpec);

/**
 * Okta event hooks: Okta sends the authentication field configured on the hook (`Authorization: <secret>`) with
 * every request, compared with the listed secrets in constant time. Verifying the hook is a GET carrying
 * `X-Okta-Verification-Challenge`, answered `{"verification": <challenge>}` only when that same header checks out.
 * The key is `eventId`; the type is the first event's `eventType`.
 */
export const okta = withHandshake(
  delivery,
  async (input) => {
    if (input.method !== "GET") return null;
    const challenge = challengeText(readHeader(input.headers, "x-okta-verification-challenge"));
    if (!challenge) return rejected("missing-signature");
    if (!(await tokenMatches(readHeader(input.headers, "authorization"), input.secrets)))
      return rejected("signature-mismatch");
    return handshake(Response.json({ verification: challenge }));
  },
  { methods: ["GET", "POST"] },
);
