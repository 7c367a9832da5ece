import { sha256Hex } from "../crypto/digest";
import { challengeText, handshake, tokenMatches, urlVerifyToken, withHandshake } from "./handshake";
import { parseJsonBody, stringAtPath, valueAtPath } from "./json";
import { readHs256Jwt } from "./jwt";
import {
  DEFAULT_TOLERANCE_SECONDS,
  describePayload,
  event,
  readHeader,
  rejected,
  signedAdapter,
  signedFormKeyOf,
  toleranceSeconds,
  utf8Key,
} from "./signed";
import { parseUnverifiedJson } from "./unverified";

/**
 * monday.com: `Authorization: <JWT>`, HS256 keyed by the app's signing secret (the shared JWT scheme). Creating a
 * webhook POSTs `{"challenge": "…"}`, answered with the same JSON, only when proven: by a valid JWT, or by the
 * URL's `verify_token` (board webhooks made through the API carry no JWT). The key is `event.triggerUuid`.
 *
 * The JWT does not cover the body, so one captured token would sign any body until it expires. Each token is
 * honoured once: the claim goes under the digest of what the token signs (`<header>.<payload>`), so the same body
 * under it is a duplicate and another body is quarantined (src/model/claims.ts claimKeyFixesContent). monday.com signs
 * every outbound request with a JWT that lives five minutes, and retries once a minute for thirty, so a genuine retry
 * may come under a new token: the shard accepts that claim, and D1's unique (source, triggerUuid), or the payload
 * hash without one, drops it at relay as the duplicate it is, never processed twice. A token may live
 * MAX_TOKEN_LIFETIME_SECONDS at most (`exp − iat`), twice monday.com's documented five minutes.
 */
export const MAX_TOKEN_LIFETIME_SECONDS = 600;

const delivery = signedAdapter({
  provider: "monday",
  keptHeaders: ["content-type", "user-agent"],
  read({ headers, now, options }) {
    const token = readHeader(headers, "authorization");
    if (!token) return "missing-signature";
    const read = readHs256Jwt(token, now, toleranceSeconds(options, DEFAULT_TOLERANCE_SECONDS), {
      expiryRequired: true,
      maxLifetimeSeconds: MAX_TOKEN_LIFETIME_SECONDS,
    });
    return typeof read === "string" ? read : read.presented;
  },
  keyFor: utf8Key("hmac-sha256"),
  async identify({ input, presented }) {
    const payload = parseJsonBody(input.rawBody);
    const challenge = challengeText(valueAtPath(payload, "challenge"));
    if (challenge) return handshake(Response.json({ challenge }));
    return event({
      ...(await signedFormKeyOf(stringAtPath(payload, "event.triggerUuid"), input.rawBody, {
        sha256: await sha256Hex(presented.signedContent),
        coversBody: false,
      })),
      ...describePayload(payload, input.options, {
        type: "event.type",
        subject: "event.pulseId",
        occurredAt: "event.triggerTime",
      }),
    });
  },
});

export const monday = withHandshake(delivery, async (input) => {
  // A challenge with a JWT is proven by the JWT (the delivery path answers it); without one, by the URL's token.
  if (readHeader(input.headers, "authorization")) return null;
  const challenge = challengeText(valueAtPath(parseUnverifiedJson(input.rawBody), "challenge"));
  if (!challenge) return null;
  if (!(await tokenMatches(urlVerifyToken(input.url), input.verifyTokens))) return rejected("signature-mismatch");
  return handshake(Response.json({ challenge }));
});
