import { concatBytes, decodeBase64, decodeHex, utf8Bytes } from "../crypto/encoding";
import { parseJsonBody, stringAtPath, valueAtPath } from "./json";
import {
  describePayload,
  event,
  eventKeyOf,
  parseUnixSeconds,
  presentedSignatures,
  readHeader,
  signedAdapter,
} from "./signed";
import type { Acknowledgement } from "./types";

/**
 * Ed25519 senders in the `X-Signature-Ed25519` style (Discord): a hex Ed25519 signature over
 * `X-Signature-Timestamp` ‖ body; the source lists the sender's public key (hex, or base64). Discord sends two
 * kinds of body under this scheme, and each wants its own answer:
 *
 * - Webhook Events (`{"version": 1, "application_id", "type", "event"?}`): type 0 is a PING, answered 204 and
 *   never claimed; type 1 is an event (`event.type`, `event.timestamp`), claimed and answered 204 with no body.
 *   They carry no id, so the key is the payload's SHA-256.
 * - Interactions (`{"id", "token", "type", …}`): type 1 is a PING, answered `{"type": 1}` (PONG); any other
 *   type is claimed under its `id` and answered with a deferred interaction response, which is what Discord
 *   accepts within its 3 seconds before the follow-up (sent by the destination with the interaction token).
 */
export type DiscordDelivery = "webhook-ping" | "webhook-event" | "interaction-ping" | "interaction";

/** Which of Discord's bodies this is. Only webhook events carry an `event` object or type 0. */
export function discordDelivery(payload: unknown): DiscordDelivery {
  const type = valueAtPath(payload, "type");
  if (type === 0) return "webhook-ping";
  const eventObject = valueAtPath(payload, "event");
  if (type === 1 && eventObject !== null && typeof eventObject === "object") return "webhook-event";
  return type === 1 ? "interaction-ping" : "interaction";
}

/** Interaction types (Discord's InteractionType) and the callback each is acknowledged with while work goes on. */
const APPLICATION_COMMAND_AUTOCOMPLETE = 4;
const MESSAGE_COMPONENT = 3;
const DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE = 5;
const DEFERRED_UPDATE_MESSAGE = 6;
const APPLICATION_COMMAND_AUTOCOMPLETE_RESULT = 8;

/**
 * A component interaction defers an update of its own message; autocomplete cannot be deferred, so it gets an
 * empty choice list; commands and modal submits defer a message ("thinking…") the follow-up replaces.
 */
export function interactionAcknowledgement(interactionType: unknown): Acknowledgement {
  if (interactionType === MESSAGE_COMPONENT) return { status: 200, json: { type: DEFERRED_UPDATE_MESSAGE } };
  if (interactionType === APPLICATION_COMMAND_AUTOCOMPLETE) {
    return { status: 200, json: { type: APPLICATION_COMMAND_AUTOCOMPLETE_RESULT, data: { choices: [] } } };
  }
  return { status: 200, json: { type: DEFERRED_CHANNEL_MESSAGE_WITH_SOURCE } };
}

function publicKeyBytes(secret: string): Uint8Array | null {
  return (/^[0-9a-fA-F]{64}$/.test(secret) ? decodeHex(secret) : decodeBase64(secret)) ?? null;
}

export const ed25519 = signedAdapter({
  provider: "ed25519",
  keptHeaders: ["x-signature-timestamp", "content-type", "user-agent"],
  defaultToleranceSeconds: 300,

  read({ headers, rawBody }) {
    const signature = readHeader(headers, "x-signature-ed25519");
    const timestampText = readHeader(headers, "x-signature-timestamp");
    if (!signature || !timestampText) return "missing-signature";
    const signedAt = parseUnixSeconds(timestampText);
    if (signedAt === null) return "malformed-signature";
    return {
      signatures: presentedSignatures([signature], "hex", "ed25519"),
      signedAt,
      signedContent: concatBytes(utf8Bytes(timestampText), rawBody),
    };
  },

  keyFor(secret) {
    const material = publicKeyBytes(secret);
    return material && material.length === 32 ? { algorithm: "ed25519", material } : null;
  },

  async identify({ input, timestampAgeSeconds }) {
    const payload = parseJsonBody(input.rawBody);
    switch (discordDelivery(payload)) {
      case "webhook-ping":
        return { kind: "handshake", response: new Response(null, { status: 204 }) };
      case "interaction-ping":
        return { kind: "handshake", response: Response.json({ type: 1 }) };
      case "webhook-event":
        return {
          ...event(
            {
              ...(await eventKeyOf(null, input.rawBody)),
              ...describePayload(payload, input.options, { type: "event.type", occurredAt: "event.timestamp" }),
            },
            timestampAgeSeconds,
          ),
          acknowledgement: { status: 204 },
        };
      case "interaction":
        return {
          ...event(
            {
              ...(await eventKeyOf(stringAtPath(payload, "id"), input.rawBody, { signed: true })),
              ...describePayload(payload, input.options, { type: "type", subject: "data.id" }),
            },
            timestampAgeSeconds,
          ),
          acknowledgement: interactionAcknowledgement(valueAtPath(payload, "type")),
        };
    }
  },
});
