import { decodeBase64Url, utf8Bytes } from "../crypto/encoding";
import { parseJsonBody } from "./json";
import { type Presented, presentedSignatures } from "./signed";
import type { RejectReason } from "./types";

/**
 * The shared JWT (JWS compact) scheme for HS256 senders (monday.com, Netlify): the signature is an HMAC-SHA256
 * over `<header>.<payload>` keyed by the shared secret. The algorithm is fixed by the provider, never taken from
 * the token (a token saying `none` or `RS256` is malformed). Where the token alone proves the delivery (monday.com:
 * it does not cover the body), it must say when it expires (`exp`, not yet past): without one a captured token
 * would verify forever. A sender whose token binds the body's hash and whose events are keyed by that hash
 * (Netlify) does not put `exp` in its tokens: a replay of it is the same bytes, a duplicate. Either way an `exp`,
 * when present, must not be past, and an `iat`, when present, must lie within the source's tolerance before now
 * and at most ISSUED_AT_SKEW_SECONDS after it (a clock a little ahead is no reason to refuse).
 */
export const ISSUED_AT_SKEW_SECONDS = 60;
const JWS = /^([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)$/;
const decoder = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });

export interface ReadJwt {
  presented: Presented;
  claims: Record<string, unknown>;
}

function jsonPart(part: string): Record<string, unknown> | null {
  const bytes = decodeBase64Url(part);
  if (!bytes) return null;
  try {
    const value = parseJsonBody(utf8Bytes(decoder.decode(bytes)));
    return value && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

export interface JwtTimeRules {
  /** `exp` must be present (a token that alone proves a delivery). */
  expiryRequired: boolean;
  /**
   * The longest a token may live: `exp` at most this long after its `iat` (after now, when it has none). A sender
   * whose token does not cover the body (monday.com) has each token honoured once, and a long-lived one would
   * outlast that promise's purpose: a captured token signs any body until it expires.
   */
  maxLifetimeSeconds?: number;
}

/**
 * Whether the token's `exp` and `iat` place it now: exp (required when `expiryRequired`) not past and within the
 * lifetime cap, iat (if any) within the window.
 */
function timelyAt(
  claims: Record<string, unknown>,
  nowSeconds: number,
  toleranceSeconds: number,
  { expiryRequired, maxLifetimeSeconds }: JwtTimeRules,
): boolean {
  const { exp, iat } = claims;
  if (exp === undefined ? expiryRequired : typeof exp !== "number" || !Number.isFinite(exp) || exp < nowSeconds)
    return false;
  if (iat !== undefined && (typeof iat !== "number" || !Number.isFinite(iat))) return false;
  if (maxLifetimeSeconds !== undefined) {
    const livesFrom = typeof iat === "number" ? iat : nowSeconds;
    if (typeof exp !== "number" || exp - livesFrom > maxLifetimeSeconds) return false;
  }
  return (
    typeof iat !== "number" || (iat <= nowSeconds + ISSUED_AT_SKEW_SECONDS && iat >= nowSeconds - toleranceSeconds)
  );
}

export function readHs256Jwt(
  token: string,
  nowMs: number,
  toleranceSeconds: number,
  rules: JwtTimeRules,
): ReadJwt | RejectReason {
  const match = JWS.exec(token.replace(/^Bearer\s+/i, ""));
  if (!match) return "malformed-signature";
  const [, headerPart, payloadPart, signaturePart] = match;
  const header = jsonPart(headerPart!);
  const claims = jsonPart(payloadPart!);
  if (!header || !claims || header.alg !== "HS256") return "malformed-signature";
  if (!timelyAt(claims, nowMs / 1000, toleranceSeconds, rules)) return "timestamp-out-of-tolerance";
  return {
    claims,
    presented: {
      signatures: presentedSignatures([signaturePart!], "base64url", "hmac-sha256"),
      signedContent: utf8Bytes(`${headerPart}.${payloadPart}`),
    },
  };
}
