import { parseJsonBody, stringAtPath } from "./json";
import {
  annotationsFrom,
  describePayload,
  event,
  eventKeyOf,
  readHeader,
  signedAdapter,
  utf8Key,
  v0TimestampedSignature,
} from "./signed";

/**
 * Slack: `X-Slack-Signature: v0=<hex>`, HMAC-SHA256 over `v0:${X-Slack-Request-Timestamp}:${body}` keyed by the
 * app's signing secret, with Slack's 5-minute tolerance. The Events API key is `event_id` (a retry repeats it, with
 * `X-Slack-Retry-Num` and `X-Slack-Retry-Reason`, which are kept). `url_verification` is answered with its
 * challenge, and only once the request has verified. Form bodies (slash commands, interactivity) carry no event id
 * and Slack does not retry them, so their key is the payload hash.
 */
export const slack = signedAdapter({
  provider: "slack",
  keptHeaders: ["x-slack-request-timestamp", "x-slack-retry-num", "x-slack-retry-reason", "content-type"],
  defaultToleranceSeconds: 300,

  read: v0TimestampedSignature("x-slack-signature", "x-slack-request-timestamp"),

  keyFor: utf8Key("hmac-sha256"),

  async identify({ input, timestampAgeSeconds }) {
    const payload = parseJsonBody(input.rawBody);
    const type = stringAtPath(payload, "type");
    if (type === "url_verification") {
      const challenge = stringAtPath(payload, "challenge");
      if (!challenge || challenge.length > 512) return { kind: "rejected", reason: "malformed-payload" };
      return {
        kind: "handshake",
        response: new Response(challenge, { headers: { "content-type": "text/plain; charset=utf-8" } }),
      };
    }
    const described = describePayload(payload, input.options, { subject: "event.item.ts", occurredAt: "event_time" });
    return event(
      {
        ...(await eventKeyOf(stringAtPath(payload, "event_id"), input.rawBody, { signed: true })),
        ...described,
        eventType: described.eventType ?? (type === "event_callback" ? stringAtPath(payload, "event.type") : type),
        annotations: annotationsFrom({
          "x-slack-retry-num": readHeader(input.headers, "x-slack-retry-num"),
          "x-slack-retry-reason": readHeader(input.headers, "x-slack-retry-reason"),
        }),
      },
      timestampAgeSeconds,
    );
  },
});
