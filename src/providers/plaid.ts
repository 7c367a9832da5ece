import { decodeProtectedHeader, errors, importJWK, jwtVerify, type JWK } from "jose";
import { sha256Hex } from "../crypto/digest";
import { tokensEqual } from "../crypto/hmac";
import { parseJsonBody, stringAtPath } from "./json";
import { fetchPinned, KeyCache, type Fetched } from "./key-fetch";
import { eventKeyOf, optionString, readHeader, rejected } from "./signed";
import type { DeliveryInput, ProviderAdapter, SourceOptions, VerifyResult } from "./types";

/**
 * Plaid: `Plaid-Verification` is an ES256 JWT whose `kid` names a key fetched from Plaid's
 * `/webhook_verification_key/get` (POST with the source's `client_id` and the listed secret, on
 * `https://production.plaid.com` or `https://sandbox.plaid.com` as `environment` says, nothing else), kept per
 * isolate by key id. The JWT's `request_body_sha256` must equal the body's SHA-256 (compared in constant time) and
 * its `iat` be at most 5 minutes old. A key Plaid reports as expired verifies nothing. Plaid gives no event id, so
 * the key is the payload's SHA-256 (a retry resends the same bytes).
 */

const PLAID_HOSTS: Readonly<Record<string, string>> = { production: "production.plaid.com", sandbox: "sandbox.plaid.com" };
const MAX_TOKEN_AGE_SECONDS = 300;

/** Each key id's public key, imported once per isolate. */
const keys = new KeyCache<CryptoKey>();

function keyUrl(options: SourceOptions): URL {
  return new URL(`https://${PLAID_HOSTS[optionString(options, "environment") ?? "production"]}/webhook_verification_key/get`);
}

/** The key with this id, asked for with each listed secret in turn (a rotation) until Plaid answers. */
async function verificationKey(input: DeliveryInput, kid: string): Promise<Fetched<CryptoKey>> {
  const url = keyUrl(input.options);
  const clientId = optionString(input.options, "client_id")!;
  return keys.get(`${url.href} ${clientId} ${kid}`, async () => {
    let outcome: Fetched<CryptoKey> = { kind: "refused" };
    for (const secret of input.secrets) {
      outcome = await fetchPinned(
        url,
        { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ client_id: clientId, secret: secret.value, key_id: kid }) },
        async (response): Promise<Fetched<CryptoKey>> => {
          const key = (await response.json().catch(() => null)) as { key?: JWK & { expired_at?: unknown } } | null;
          if (!key?.key || key.key.kty !== "EC" || key.key.crv !== "P-256") return { kind: "refused" };
          // A rotated-out key verifies nothing, however the token was signed.
          if (key.key.expired_at !== null && key.key.expired_at !== undefined) return { kind: "refused" };
          try {
            return { kind: "found", value: (await importJWK(key.key, "ES256")) as CryptoKey };
          } catch {
            return { kind: "refused" };
          }
        },
        refusalOf,
      );
      if (outcome.kind !== "refused") return outcome;
    }
    return outcome;
  });
}

/**
 * Plaid refusing our own credentials (a wrong `client_id` or secret for this environment) is a deploy mistake, not
 * a forged delivery: unavailable, so the answer is a 503 the sender retries once the config is fixed. Any other
 * refusal (an unknown key id) means the token names a key Plaid never published.
 */
async function refusalOf(response: Response): Promise<"refused" | "unavailable"> {
  const error = (await response.json().catch(() => null)) as { error_code?: unknown } | null;
  return error?.error_code === "INVALID_API_KEYS" ? "unavailable" : "refused";
}

function rejectionOf(error: unknown): VerifyResult {
  if (error instanceof errors.JWTExpired || (error instanceof errors.JWTClaimValidationFailed && error.claim === "iat")) {
    return rejected("timestamp-out-of-tolerance");
  }
  if (error instanceof errors.JWSSignatureVerificationFailed) return rejected("signature-mismatch");
  return rejected("malformed-signature");
}

export const plaid: ProviderAdapter = {
  provider: "plaid",
  keptHeaders: ["content-type", "user-agent"],

  validateOptions(options) {
    const problems: string[] = [];
    if (!optionString(options, "client_id")) problems.push("client_id must be the Plaid client id the key requests are made with");
    const environment = options.environment;
    if (environment !== undefined && (typeof environment !== "string" || !(environment in PLAID_HOSTS))) {
      problems.push(`environment must be one of ${Object.keys(PLAID_HOSTS).join(", ")}`);
    }
    return problems;
  },

  async verify(input) {
    if (input.secrets.length === 0) return rejected("no-usable-secret");
    const token = readHeader(input.headers, "plaid-verification");
    if (!token) return rejected("missing-signature");
    let kid: string | undefined;
    try {
      const header = decodeProtectedHeader(token);
      if (header.alg !== "ES256" || typeof header.kid !== "string" || header.kid.length === 0 || header.kid.length > 128) {
        return rejected("malformed-signature");
      }
      kid = header.kid;
    } catch {
      return rejected("malformed-signature");
    }

    const key = await verificationKey(input, kid);
    if (key.kind === "unavailable") return { kind: "unavailable", reason: "plaid-verification-key-unreachable" };
    if (key.kind === "refused") return rejected("signature-mismatch");

    let claims: Record<string, unknown>;
    try {
      const verified = await jwtVerify(token, key.value, {
        algorithms: ["ES256"],
        maxTokenAge: MAX_TOKEN_AGE_SECONDS,
        currentDate: new Date(input.now),
      });
      claims = verified.payload;
    } catch (error) {
      return rejectionOf(error);
    }
    const bodyHash = claims.request_body_sha256;
    if (typeof bodyHash !== "string" || !(await tokensEqual(bodyHash, await sha256Hex(input.rawBody)))) return rejected("signature-mismatch");

    const payload = parseJsonBody(input.rawBody);
    const webhookType = stringAtPath(payload, "webhook_type");
    const webhookCode = stringAtPath(payload, "webhook_code");
    return {
      kind: "event",
      identity: {
        ...(await eventKeyOf(null, input.rawBody)),
        eventType: webhookType && webhookCode ? `${webhookType}.${webhookCode}` : (webhookCode ?? webhookType),
        subjectId: stringAtPath(payload, "item_id"),
        version: null,
        occurredAt: typeof claims.iat === "number" ? claims.iat * 1000 : null,
        annotations: { "event-key-origin": "payload-sha256" },
      },
      timestampAgeSeconds: typeof claims.iat === "number" ? Math.round(input.now / 1000 - claims.iat) : undefined,
    };
  },
};

/** Tests: forget every key this isolate fetched. */
export function forgetPlaidKeys(): void {
  keys.clear();
}
