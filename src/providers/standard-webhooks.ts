import { concatBytes, decodeBase64, encodeBase64, utf8Bytes } from "../crypto/encoding";
import { hmacSign, hmacVerify } from "../crypto/hmac";
import { parseJsonBody, stringAtPath, timeAtPath, versionAtPath } from "./json";
import type { DeliveryInput, ProviderAdapter, SourceOptions, VerifyResult } from "./types";

/**
 * Standard Webhooks (https://www.standardwebhooks.com), symmetric v1: HMAC-SHA256 over
 * `${webhook-id}.${webhook-timestamp}.${body}` with a `whsec_`-prefixed base64 secret. Svix sends the same
 * scheme under `svix-*` header names. The dedupe key is `webhook-id`, stable across the sender's retries.
 */

const DEFAULT_TOLERANCE_SECONDS = 300;
/** A signature header carrying more than this many entries is refused rather than looped over. */
const MAX_SIGNATURE_ENTRIES = 16;
const MAX_ID_LENGTH = 256;

export function standardWebhooksSecretBytes(secret: string): Uint8Array | null {
  return decodeBase64(secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret);
}

function headerPair(headers: Headers, name: "id" | "timestamp" | "signature"): string | null {
  return headers.get(`webhook-${name}`) ?? headers.get(`svix-${name}`);
}

/** Each space-separated `v1,<base64>` entry; other versions and junk are skipped, not fatal. */
function v1Signatures(header: string): Uint8Array[] | null {
  const entries = header.split(" ").filter((entry) => entry.length > 0);
  if (entries.length === 0 || entries.length > MAX_SIGNATURE_ENTRIES) return null;
  const signatures: Uint8Array[] = [];
  for (const entry of entries) {
    const comma = entry.indexOf(",");
    if (comma < 0 || entry.slice(0, comma) !== "v1") continue;
    const bytes = decodeBase64(entry.slice(comma + 1));
    if (bytes && bytes.length === 32) signatures.push(bytes);
  }
  return signatures;
}

export function toleranceSeconds(options: SourceOptions, fallback: number): number {
  const value = options.tolerance_seconds;
  return typeof value === "number" && value > 0 ? value : fallback;
}

export const standardWebhooks: ProviderAdapter = {
  provider: "standard-webhooks",
  keptHeaders: ["webhook-id", "webhook-timestamp", "svix-id", "svix-timestamp", "content-type", "user-agent"],

  async verify(input: DeliveryInput): Promise<VerifyResult> {
    const webhookId = headerPair(input.headers, "id");
    const timestampText = headerPair(input.headers, "timestamp");
    const signatureHeader = headerPair(input.headers, "signature");
    if (!webhookId || !timestampText || !signatureHeader) return { kind: "rejected", reason: "missing-signature" };
    if (webhookId.length > MAX_ID_LENGTH || !/^\d{1,12}$/.test(timestampText)) {
      return { kind: "rejected", reason: "malformed-signature" };
    }
    const signatures = v1Signatures(signatureHeader);
    if (!signatures || signatures.length === 0) return { kind: "rejected", reason: "malformed-signature" };

    const timestampAgeSeconds = Math.floor(input.now / 1000) - Number(timestampText);
    if (Math.abs(timestampAgeSeconds) > toleranceSeconds(input.options, DEFAULT_TOLERANCE_SECONDS)) {
      return { kind: "rejected", reason: "timestamp-out-of-tolerance" };
    }

    const signedContent = concatBytes(utf8Bytes(`${webhookId}.${timestampText}.`), input.rawBody);
    let verified = false;
    for (const secret of input.secrets) {
      const key = standardWebhooksSecretBytes(secret.value);
      if (!key) continue;
      for (const signature of signatures) {
        if (await hmacVerify("SHA-256", key, signature, signedContent)) verified = true;
      }
      if (verified) break;
    }
    if (!verified) return { kind: "rejected", reason: "signature-mismatch" };

    const payload = parseJsonBody(input.rawBody);
    const options = input.options as Record<string, string | undefined>;
    return {
      kind: "event",
      timestampAgeSeconds,
      identity: {
        eventKey: webhookId,
        eventKeyOrigin: "provider-id",
        eventType: stringAtPath(payload, options.type_path ?? "type"),
        subjectId: stringAtPath(payload, options.subject_path),
        version: versionAtPath(payload, options.version_path),
        occurredAt: timeAtPath(payload, options.occurred_at_path ?? "timestamp"),
      },
    };
  },
};

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
