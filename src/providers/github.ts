import { parseJsonBody, stringAtPath } from "./json";
import {
  annotationsFrom,
  bodySignature,
  describePayload,
  event,
  eventKeyOf,
  headerTypeUnlessConfigured,
  readHeader,
  signedAdapter,
  utf8Key,
} from "./signed";

/**
 * GitHub: `X-Hub-Signature-256: sha256=<hex>`, HMAC-SHA256 over the body keyed by the webhook secret as text.
 * The key is `X-GitHub-Delivery` (a redelivery keeps it); the type is `X-GitHub-Event`, so the `ping` sent when a
 * hook is created is recorded as an ordinary event of type "ping". The signature has no timestamp.
 */
export const github = signedAdapter({
  provider: "github",
  keptHeaders: [
    "x-github-delivery",
    "x-github-event",
    "x-github-hook-id",
    "x-github-hook-installation-target-id",
    "user-agent",
  ],
  read: bodySignature("x-hub-signature-256", "hex", "hmac-sha256", "sha256="),
  keyFor: utf8Key("hmac-sha256"),

  async identify({ input }) {
    const payload = parseJsonBody(input.rawBody);
    const described = describePayload(payload, input.options, {});
    return event({
      ...(await eventKeyOf(readHeader(input.headers, "x-github-delivery"), input.rawBody, { signed: false })),
      ...described,
      eventType: headerTypeUnlessConfigured(
        input.options,
        described.eventType,
        readHeader(input.headers, "x-github-event"),
      ),
      annotations: annotationsFrom({ action: stringAtPath(payload, "action") }),
    });
  },
});
