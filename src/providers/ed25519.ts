import { concatBytes, decodeBase64, decodeHex, utf8Bytes } from "../crypto/encoding";
import { parseJsonBody, stringAtPath, valueAtPath } from "./json";
import { describePayload, event, eventKeyOf, parseUnixSeconds, presentedSignatures, readHeader, signedAdapter } from "./signed";

/**
 * Ed25519 senders in the `X-Signature-Ed25519` style (Discord interactions and others): a hex Ed25519 signature
 * over `X-Signature-Timestamp` ‖ body; the source lists the sender's public key (hex, or base64). The key is the
 * payload's `id`. A PING (`{"type": 1}`), which Discord sends to check the endpoint, is answered `{"type": 1}`
 * once it verifies.
 */
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
    if (valueAtPath(payload, "type") === 1) return { kind: "handshake", response: Response.json({ type: 1 }) };
    return event(
      {
        ...(await eventKeyOf(stringAtPath(payload, "id"), input.rawBody)),
        ...describePayload(payload, input.options, { type: "type", subject: "data.id" }),
      },
      timestampAgeSeconds,
    );
  },
});
