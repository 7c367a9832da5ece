import { challengeText, handshake, tokenMatches, urlVerifyToken, withHandshake } from "./handshake";
import { parseJsonBody, stringAtPath, valueAtPath } from "./json";
import { readHs256Jwt } from "./jwt";
import {
  DEFAULT_TOLERANCE_SECONDS,
  describePayload,
  event,
  eventKeyOf,
  readHeader,
  rejected,
  signedAdapter,
  toleranceSeconds,
  utf8Key,
} from "./signed";
import { parseUnverifiedJson } from "./unverified";

/**
 * monday.com: `Authorization: <JWT>`, HS256 keyed by the app's signing secret (the shared JWT scheme). Creating a
 * webhook POSTs `{"challenge": "…"}`, answered with the same JSON, only when proven: by a valid JWT, or by the
 * URL's `verify_token` (board webhooks made through the API carry no JWT). The key is `event.triggerUuid`.
 */
const delivery = signedAdapter({
  provider: "monday",
  keptHeaders: ["content-type", "user-agent"],
  read({ headers, now, options }) {
    const token = readHeader(headers, "authorization");
    if (!token) return "missing-signature";
    const read = readHs256Jwt(token, now, toleranceSeconds(options, DEFAULT_TOLERANCE_SECONDS), {
      expiryRequired: true,
    });
    return typeof read === "string" ? read : read.presented;
  },
  keyFor: utf8Key("hmac-sha256"),
  async identify({ input }) {
    const payload = parseJsonBody(input.rawBody);
    const challenge = challengeText(valueAtPath(payload, "challenge"));
    if (challenge) return handshake(Response.json({ challenge }));
    return event({
      ...(await eventKeyOf(stringAtPath(payload, "event.triggerUuid"), input.rawBody, { signed: false })),
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
