import type { MiddlewareHandler } from "hono";
import { getCookie } from "hono/cookie";
import { encodeHex, utf8Bytes } from "../../crypto/encoding";
import { hmacSign, tokensEqual } from "../../crypto/hmac";
import { apiError } from "../../lib/errors";
import { isLocalDevelopment } from "../../lib/local-development";
import { secretValue } from "../../lib/secrets";
import { type Actor, ADMIN_TOKEN_ACTOR } from "./actor";
import { loginClient, refuseWrongToken } from "./login-throttle";
import { MIN_ADMIN_TOKEN_ENTROPY_BITS, tokenStrength } from "./token-strength";

/**
 * Who may see receipts: whoever holds the ADMIN_TOKEN Worker secret. The API takes it as a bearer token; the
 * dashboard trades it once, through a login form, for a signed session cookie, so the token never sits in a
 * URL, a page or script-readable storage. Without the secret configured, both stay shut rather than open.
 */

/** `actor`: who signed in, set by the sign-in guards (src/admin/access/sign-in.ts) before any route runs. */
export type AdminEnv = { Bindings: Env; Variables: { actor: Actor } };

const BEARER = /^Bearer\s+(\S+)\s*$/i;
export const SESSION_COOKIE = "admin_session";
export const SESSION_TTL_MS = 12 * 3_600_000;

/**
 * Every value the repository ships as an example (.dev.vars.example, the README's local commands). Anyone can read
 * them, so as ADMIN_TOKEN they open nothing outside local development; test/admin/token-guard.test.ts keeps this
 * list equal to .dev.vars.example.
 */
export const SHIPPED_EXAMPLE_VALUES: readonly string[] = [
  "local-admin-token-change-me",
  "whsec_ZGVtby1zZWNyZXQtZm9yLWxvY2FsLWRldmVsb3BtZW50LW9ubHk=",
  "whsec_Z2F0ZXdheS1zZWNyZXQtZm9yLWxvY2FsLWRldmVsb3BtZW50",
];

export type AdminTokenProblem = "unset" | "shipped-example" | "weak";

/**
 * Why the admin surface is shut, or null when ADMIN_TOKEN can be used. Short tokens count as unset; a long one made
 * of few distinct characters (./token-strength.ts) is "weak", anywhere, local development included.
 */
export function adminTokenProblem(env: Env): AdminTokenProblem | null {
  const token = secretValue(env, "ADMIN_TOKEN");
  if (token === null) return "unset";
  const strength = tokenStrength(token);
  if (strength === "too-short") return "unset";
  if (SHIPPED_EXAMPLE_VALUES.includes(token) && !isLocalDevelopment(env)) return "shipped-example";
  if (strength === "low-entropy") return "weak";
  return null;
}

export const SHIPPED_EXAMPLE_MESSAGE =
  "The admin token is the shipped example value, which anyone can read, so the admin API and dashboard stay shut. " +
  "Set a new one: npm run -s cli -- secret token | npx wrangler secret put ADMIN_TOKEN";

export const WEAK_TOKEN_MESSAGE =
  `The admin token repeats too few characters to be hard to guess (under ${MIN_ADMIN_TOKEN_ENTROPY_BITS} bits of ` +
  "Shannon entropy), so the admin API and dashboard stay shut. Set a random one: " +
  "npm run -s cli -- secret token | npx wrangler secret put ADMIN_TOKEN";

/** The 503 for a configured token that cannot be used, or null when it can (or is simply unset). */
export function adminTokenConfigError(env: Env): { code: string; message: string } | null {
  const problem = adminTokenProblem(env);
  if (problem === "shipped-example") return { code: "admin_token_is_example", message: SHIPPED_EXAMPLE_MESSAGE };
  if (problem === "weak") return { code: "admin_token_weak", message: WEAK_TOKEN_MESSAGE };
  return null;
}

/** The configured token, or null when the admin surface is shut (unset, too short, or a shipped example). */
export function adminToken(env: Env): string | null {
  return adminTokenProblem(env) === null ? secretValue(env, "ADMIN_TOKEN") : null;
}

/**
 * The API's guard. A wrong bearer token counts against its client like a failed sign-in (./login-throttle.ts):
 * past the limit it is answered 429 with Retry-After. The right token is never refused, throttled or not, so
 * whoever shares the operator's address cannot lock the operator out.
 */
export const requireBearer: MiddlewareHandler<AdminEnv> = async (c, next) => {
  const expected = adminToken(c.env);
  const configError = adminTokenConfigError(c.env);
  if (configError) throw apiError(503, configError.code, configError.message);
  if (!expected) throw apiError(503, "admin_disabled", "The admin API is disabled: set the ADMIN_TOKEN secret.");
  const presented = BEARER.exec(c.req.header("authorization") ?? "")?.[1];
  if (!presented || !(await tokensEqual(presented, expected))) {
    // Only a token presented and refused is a guess; a request with none (a browser wandering in) is not counted.
    const retryAfter = presented ? refuseWrongToken(loginClient(c.req.raw), Date.now()) : null;
    if (retryAfter !== null)
      throw apiError(429, "too_many_failed_attempts", "Too many wrong admin tokens from this address; retry later.", {
        "retry-after": String(retryAfter),
      });
    throw apiError(401, "unauthorized", "A valid admin bearer token is required.", {
      "www-authenticate": 'Bearer realm="admin"',
    });
  }
  c.set("actor", { name: ADMIN_TOKEN_ACTOR, role: "admin", via: "api" });
  await next();
  // Answers carry payload bodies: no shared cache may keep them.
  c.header("cache-control", "no-store");
};

/** A session is "<expiresAt>.<HMAC(token, expiresAt)>": rotating the token ends every session. */
async function sessionSignature(token: string, expiresAt: number): Promise<string> {
  return encodeHex(await hmacSign("SHA-256", utf8Bytes(token), utf8Bytes(`admin-session:${expiresAt}`)));
}

export async function issueSession(token: string, now = Date.now()): Promise<string> {
  const expiresAt = now + SESSION_TTL_MS;
  return `${expiresAt}.${await sessionSignature(token, expiresAt)}`;
}

export async function sessionIsValid(env: Env, cookie: string | undefined, now = Date.now()): Promise<boolean> {
  const expected = adminToken(env);
  const match = cookie ? /^(\d{13})\.([0-9a-f]{64})$/.exec(cookie) : null;
  if (!expected || !match) return false;
  const expiresAt = Number(match[1]);
  if (expiresAt <= now) return false;
  return tokensEqual(match[2]!, await sessionSignature(expected, expiresAt));
}

export async function hasSession(c: Parameters<MiddlewareHandler<AdminEnv>>[0]): Promise<boolean> {
  return sessionIsValid(c.env, getCookie(c, SESSION_COOKIE));
}
