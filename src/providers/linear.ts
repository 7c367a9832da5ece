import { parseJsonBody, stringAtPath } from "./json";
import { bodySignature, describePayload, event, eventKeyOf, readHeader, signedAdapter, utf8Key } from "./signed";
import { parseUnverifiedJson } from "./unverified";

/**
 * Linear: `Linear-Signature: <hex>`, HMAC-SHA256 over the body. The signed time is the payload's
 * `webhookTimestamp` (epoch ms), held to Linear's recommended one minute. The key is the `Linear-Delivery` header;
 * the type is `${type}.${action}` from the payload (e.g. `Issue.create`).
 */
const bodyRead = bodySignature("linear-signature", "hex", "hmac-sha256");

export const linear = signedAdapter({
  provider: "linear",
  keptHeaders: ["linear-delivery", "linear-event", "user-agent"],
  defaultToleranceSeconds: 60,

  read(input) {
    const presented = bodyRead(input);
    if (typeof presented === "string") return presented;
    const timestampMs = (parseUnverifiedJson(input.rawBody) as { webhookTimestamp?: unknown } | undefined)
      ?.webhookTimestamp;
    if (typeof timestampMs !== "number" || !Number.isSafeInteger(timestampMs)) return "malformed-signature";
    return { ...presented, signedAt: Math.floor(timestampMs / 1000) };
  },

  keyFor: utf8Key("hmac-sha256"),

  async identify({ input, timestampAgeSeconds }) {
    const payload = parseJsonBody(input.rawBody);
    const described = describePayload(payload, input.options, { subject: "data.id", occurredAt: "createdAt" });
    const entity = stringAtPath(payload, "type");
    const action = stringAtPath(payload, "action");
    return event(
      {
        ...(await eventKeyOf(readHeader(input.headers, "linear-delivery"), input.rawBody, { signed: false })),
        ...described,
        eventType: described.eventType ?? (entity && action ? `${entity}.${action}` : entity),
      },
      timestampAgeSeconds,
    );
  },
});
