import { decodeProtectedHeader, errors, importJWK, type JWK, jwtVerify } from "jose";
import { sha256Hex } from "../crypto/digest";
import { tokensEqual } from "../crypto/hmac";
import { parseJsonBody, stringAtPath } from "./json";
import { type Fetched, KeyCache } from "./key-cache";
import { fetchPinned } from "./key-fetch";
import { eventKeyOf, optionString, readHeader, rejected } from "./signed";
import type { DeliveryInput, ProviderAdapter, ProviderOptions, VerifyResult } from "./types";

/**
 * Plaid: `Plaid-Verification` is an ES256 JWT whose `kid` names a key fetched from Plaid's
 * `/webhook_verification_key/get` (POST with the source's `client_id` and the listed secret, on
 * `https://production.plaid.com` or `https://sandbox.plaid.com` as `environment` says, nothing else), kept per
 * isolate by key id; a `kid` that is not a UUID is refused before any fetch. The JWT's `request_body_sha256` must
 * equal the body's SHA-256 (compared in constant time) and its `iat` be at most 5 minutes old. A key Plaid reports
 * as expired verifies nothing. Plaid gives no event id, so the key is the payload's SHA-256 (a retry resends the
 * same bytes).
 */

const PLAID_HOSTS: Readonly<Record<string, string>> = {
  production: "production.plaid.com",
  sandbox: "sandbox.plaid.com",
};
const MAX_TOKEN_AGE_SECONDS = 300;

/** Each key id's public key, imported once per isolate (src/providers/key-cache.ts: refusals remembered too). */
const keys = new KeyCache<CryptoKey>();

/** Plaid's key ids are UUIDs; any other `kid` is a forgery refused before anything is fetched. */
const KEY_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function keyUrl(options: ProviderOptions): URL {
  return new URL(
    `https://${PLAID_HOSTS[optionString(options, "environment") ?? "production"]}/webhook_verification_key/get`,
  );
}

function cacheKeyOf(input: DeliveryInput, kid: string): string {
  return `${keyUrl(input.options).href} ${optionString(input.options, "client_id")!} ${kid}`;
}

/**
 * The key with this id. Each listed secret is tried in turn only while Plaid refuses the credentials themselves (a
 * secret rotated out): an answer about the key id is the same whichever of our secrets asked, so a forged `kid`
 * costs one call, not one per secret.
 */
async function verificationKey(input: DeliveryInput, kid: string): Promise<Fetched<CryptoKey>> {
  const url = keyUrl(input.options);
  const clientId = optionString(input.options, "client_id")!;
  return keys.get(cacheKeyOf(input, kid), input.source ?? "", async () => {
    for (const secret of input.secrets) {
      let credentialsRefused = false;
      const outcome = await fetchPinned(
        url,
        {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ client_id: clientId, secret: secret.value, key_id: kid }),
        },
        readKey,
        async (response) => {
          credentialsRefused = await refusesCredentials(response);
          return credentialsRefused ? "unavailable" : "refused";
        },
      );
      if (!credentialsRefused) return outcome;
    }
    // Plaid refused every secret listed: a deploy mistake, not a forged delivery. A 503 the sender retries once fixed.
    return { kind: "unavailable" };
  });
}

async function readKey(response: Response): Promise<Fetched<CryptoKey>> {
  const key = (await response.json().catch(() => null)) as { key?: JWK & { expired_at?: unknown } } | null;
  if (!key?.key || key.key.kty !== "EC" || key.key.crv !== "P-256") return { kind: "refused" };
  // A rotated-out key verifies nothing, however the token was signed.
  if (key.key.expired_at !== null && key.key.expired_at !== undefined) return { kind: "refused" };
  try {
    return { kind: "found", value: (await importJWK(key.key, "ES256")) as CryptoKey };
  } catch {
    return { kind: "refused" };
  }
}

/** `INVALID_API_KEYS`: a wrong `client_id` or secret for this environment. Any other refusal is about the key id. */
async function refusesCredentials(response: Response): Promise<boolean> {
  const error = (await response.json().catch(() => null)) as { error_code?: unknown } | null;
  return error?.error_code === "INVALID_API_KEYS";
}

function rejectionOf(error: unknown): VerifyResult {
  if (
    error instanceof errors.JWTExpired ||
    (error instanceof errors.JWTClaimValidationFailed && error.claim === "iat")
  ) {
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
    if (!optionString(options, "client_id"))
      problems.push("client_id must be the Plaid client id the key requests are made with");
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
      if (header.alg !== "ES256" || typeof header.kid !== "string" || !KEY_ID.test(header.kid)) {
        return rejected("malformed-signature");
      }
      kid = header.kid;
    } catch {
      return rejected("malformed-signature");
    }

    const key = await verificationKey(input, kid);
    if (key.kind === "unavailable")
      return {
        kind: "unavailable",
        reason: key.busy ? "key-fetches-at-capacity" : "plaid-verification-key-unreachable",
      };
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
    if (typeof bodyHash !== "string" || !(await tokensEqual(bodyHash, await sha256Hex(input.rawBody))))
      return rejected("signature-mismatch");
    keys.proved(cacheKeyOf(input, kid), key.value);

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
