import { concatBytes, decodeBase64, encodeBase64, utf8Bytes } from "../crypto/encoding";
import { hmacSign } from "../crypto/hmac";
import type { VerificationKey } from "../crypto/verify";
import { parseJsonBody } from "./json";
import {
  DEFAULT_TOLERANCE_SECONDS,
  describePayload,
  event,
  type PresentedSignature,
  parseSignatureList,
  parseUnixSeconds,
  presentedSignatures,
  readHeader,
  signedAdapter,
  toleranceSeconds,
} from "./signed";

/**
 * Standard Webhooks (https://www.standardwebhooks.com): `${webhook-id}.${webhook-timestamp}.${body}` signed
 * either with HMAC-SHA256 (`v1,<base64>`, `whsec_` secret) or with Ed25519 (`v1a,<base64>`, the source lists the
 * sender's `whpk_` public key). Svix sends the same scheme under `svix-*` header names. The dedupe key is
 * `webhook-id`, stable across the sender's retries.
 */

export function standardWebhooksSecretBytes(secret: string): Uint8Array | null {
  return decodeBase64(secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret);
}

function headerPair(headers: Headers, name: "id" | "timestamp" | "signature"): string | null {
  return readHeader(headers, `webhook-${name}`) ?? readHeader(headers, `svix-${name}`);
}

function keyFor(secret: string): VerificationKey | null {
  if (secret.startsWith("whpk_")) {
    const publicKey = decodeBase64(secret.slice("whpk_".length));
    return publicKey && publicKey.length === 32 ? { algorithm: "ed25519", material: publicKey } : null;
  }
  const material = standardWebhooksSecretBytes(secret);
  return material && material.length > 0 ? { algorithm: "hmac-sha256", material } : null;
}

/** A Unix time inside the tolerance, written as `text` (digits only); what a timestamp part could be read as. */
function timeWithin(text: string, now: number, tolerance: number): boolean {
  const seconds = parseUnixSeconds(text);
  return seconds !== null && Math.abs(Math.floor(now / 1000) - seconds) <= tolerance;
}

/**
 * Whether `id.timestamp.body` splits another way that would verify as well: an id holding `.` and then a time
 * inside the tolerance (`evt.1764800000`) signs what id `evt` does with that time and the rest moved to the front of
 * the body, a new key for the same signed bytes; and a body opening with such a time and a `.` is that moved copy.
 * Either is refused, so the signed bytes name one id.
 */
function splitsAnotherWay(webhookId: string, rawBody: Uint8Array, now: number, tolerance: number): boolean {
  if (
    webhookId
      .split(".")
      .slice(1)
      .some((segment) => timeWithin(segment, now, tolerance))
  )
    return true;
  const opening = /^(\d{1,15})\./.exec(new TextDecoder().decode(rawBody.subarray(0, 17)));
  return opening !== null && timeWithin(opening[1]!, now, tolerance);
}

export const standardWebhooks = signedAdapter({
  provider: "standard-webhooks",
  keptHeaders: ["webhook-id", "webhook-timestamp", "svix-id", "svix-timestamp", "content-type", "user-agent"],

  read({ headers, rawBody, now, options }) {
    const webhookId = headerPair(headers, "id");
    const timestampText = headerPair(headers, "timestamp");
    const signatureHeader = headerPair(headers, "signature");
    if (!webhookId || !timestampText || !signatureHeader) return "missing-signature";
    const signedAt = parseUnixSeconds(timestampText);
    const entries = parseSignatureList(signatureHeader, " ", ",");
    if (signedAt === null || !entries) return "malformed-signature";
    if (splitsAnotherWay(webhookId, rawBody, now, toleranceSeconds(options, DEFAULT_TOLERANCE_SECONDS)))
      return "malformed-signature";
    const signatures: PresentedSignature[] = [
      ...presentedSignatures(
        entries.filter(([version]) => version === "v1").map(([, value]) => value),
        "base64",
        "hmac-sha256",
      ),
      ...presentedSignatures(
        entries.filter(([version]) => version === "v1a").map(([, value]) => value),
        "base64",
        "ed25519",
      ),
    ];
    return { signatures, signedAt, signedContent: concatBytes(utf8Bytes(`${webhookId}.${timestampText}.`), rawBody) };
  },

  keyFor,

  identify({ input, timestampAgeSeconds }) {
    const webhookId = headerPair(input.headers, "id")!;
    const payload = parseJsonBody(input.rawBody);
    return event(
      {
        eventKey: webhookId,
        eventKeyOrigin: "provider-id",
        eventKeySigned: true,
        ...describePayload(payload, input.options, { type: "type", occurredAt: "timestamp" }),
      },
      timestampAgeSeconds,
    );
  },
});

/** Signs an outgoing delivery (forwards, alerts) with the same scheme, so receivers can verify it with any library. */
export async function signStandardWebhook(
  secret: string,
  webhookId: string,
  timestampSeconds: number,
  body: Uint8Array,
): Promise<string> {
  const key = standardWebhooksSecretBytes(secret);
  if (!key) throw new Error("signing secret is not valid base64");
  const signature = await hmacSign("SHA-256", key, concatBytes(utf8Bytes(`${webhookId}.${timestampSeconds}.`), body));
  return `v1,${encodeBase64(signature)}`;
}
