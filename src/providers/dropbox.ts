import { challengeText, echo, handshake, tokenMatches, urlVerifyToken, withHandshake } from "./handshake";
import { presetByName } from "./presets";
import { rejected } from "./signed";

/**
 * Dropbox: `X-Dropbox-Signature: <hex>`, HMAC-SHA256 over the body keyed by the app secret (a preset). Dropbox
 * verifies the URL with `GET ?challenge=<text>` and expects it echoed as text with `nosniff`. That GET carries no
 * signature, so the URL registered with Dropbox holds `?verify_token=<token>` and the challenge is echoed only when
 * the token equals the one the source names in `verify_token`.
 */
export const dropbox = withHandshake(
  presetByName("dropbox"),
  async (input) => {
    if (input.method !== "GET") return null;
    const challenge = challengeText(new URL(input.url).searchParams.get("challenge"));
    if (!challenge) return rejected("missing-signature");
    if (!(await tokenMatches(urlVerifyToken(input.url), input.verifyTokens))) return rejected("signature-mismatch");
    return handshake(echo(challenge));
  },
  { methods: ["GET", "POST"] },
);
