import { utf8Bytes } from "../crypto/encoding";
import { challengeText, echo, handshake, tokenMatches, urlVerifyToken, withHandshake } from "./handshake";
import { parseJsonBody, stringAtPath, valueAtPath } from "./json";
import { describePayload, event, eventKeyOf, rejected, signedAdapter, utf8Key } from "./signed";
import { parseUnverifiedJson } from "./unverified";

/**
 * Microsoft Graph change notifications. Creating a subscription POSTs `?validationToken=<text>`, to be echoed as
 * text/plain within 10 s; it carries no proof, so the notification URL holds `?verify_token=<token>` and the echo
 * happens only when it equals the source's `verify_token`. Notifications (`{"value": [...]}`) are proven by each
 * item's `clientState`, the secret given when subscribing: every item must carry the same one, compared with the
 * listed secrets in constant time. That token is the source's secret, so it never leaves the route: the body kept,
 * shown and forwarded is the notification re-serialized with every `clientState` replaced by `[redacted]`, and the
 * key (a batch has no id) is that body's SHA-256, the same for Graph's retries of the same bytes. Graph wants `202`.
 */
export const REDACTED = "[redacted]";

/** The notification without the secret it carries: every item's clientState replaced; null if it is not one. */
function withoutClientState(payload: unknown): Uint8Array | null {
  const items = valueAtPath(payload, "value");
  if (!Array.isArray(items)) return null;
  const redactedItems = items.map((item: unknown) =>
    item !== null && typeof item === "object" && "clientState" in item
      ? { ...(item as Record<string, unknown>), clientState: REDACTED }
      : item,
  );
  return utf8Bytes(JSON.stringify({ ...(payload as Record<string, unknown>), value: redactedItems }));
}
const notifications = signedAdapter({
  provider: "microsoft-graph",
  keptHeaders: ["content-type", "user-agent"],

  read({ rawBody }) {
    const items = valueAtPath(parseUnverifiedJson(rawBody), "value");
    if (!Array.isArray(items) || items.length === 0 || items.length > 100) return "missing-signature";
    const states = new Set(items.map((item) => stringAtPath(item, "clientState")));
    // Every item must be proven: one forged item beside a genuine one is not accepted.
    const [state] = [...states];
    if (states.size !== 1 || !state) return "missing-signature";
    return { signatures: [{ algorithm: "token", bytes: utf8Bytes(state) }], signedContent: new Uint8Array(0) };
  },

  keyFor: utf8Key("token"),

  async identify({ input }) {
    const payload = parseJsonBody(input.rawBody);
    const storedBody = withoutClientState(payload);
    if (!storedBody) return rejected("malformed-payload");
    return {
      ...event({
        ...(await eventKeyOf(null, storedBody)),
        ...describePayload(payload, input.options, { type: "value.0.changeType", subject: "value.0.resource" }),
      }),
      acknowledgement: { status: 202 },
      storedBody,
    };
  },
});

export const microsoftGraph = withHandshake(notifications, async (input) => {
  const token = new URL(input.url).searchParams.get("validationToken");
  if (token === null) return null;
  const challenge = challengeText(token);
  if (!challenge) return rejected("missing-signature");
  if (!(await tokenMatches(urlVerifyToken(input.url), input.verifyTokens))) return rejected("signature-mismatch");
  return handshake(echo(challenge));
});
