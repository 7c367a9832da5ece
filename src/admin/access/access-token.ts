import { createRemoteJWKSet, customFetch, errors, type JWTPayload, jwtVerify } from "jose";
import { redirectedForTests } from "../../providers/key-fetch";
import type { AccessIdentity } from "./roles";

/**
 * Checks a Cf-Access-Jwt-Assertion: signed by one of the team's published keys
 * (https://<team>.cloudflareaccess.com/cdn-cgi/access/certs), issued by the team, for this application's audience
 * (ACCESS_AUD), and not expired. Validating the header's signature is what makes it safe: a request that reached the
 * Worker around Access (its workers.dev address, say) could carry any header it likes.
 */

export const ACCESS_ASSERTION_HEADER = "cf-access-jwt-assertion";

export type AccessTokenCheck =
  | { kind: "verified"; identity: AccessIdentity }
  /** Not a valid token of this team for this application (forged, expired, another audience): a 401. */
  | { kind: "refused"; reason: string }
  /** The team's certificates could not be fetched: a 503, try again. */
  | { kind: "unavailable" };

/**
 * One key set per team, per isolate: jose keeps the fetched keys (10 minutes) and fetches again, at most every
 * 30 s, when a token names a key it does not know (Access rotates its keys every few weeks).
 */
const keySets = new Map<string, ReturnType<typeof createRemoteJWKSet>>();

function keySetOf(teamOrigin: string): ReturnType<typeof createRemoteJWKSet> {
  let keySet = keySets.get(teamOrigin);
  if (!keySet) {
    keySet = createRemoteJWKSet(new URL(`${teamOrigin}/cdn-cgi/access/certs`), {
      // Through the same door as every other published key (src/providers/key-fetch.ts), so tests meet the stand-in.
      [customFetch]: (url, init) => fetch(redirectedForTests(new URL(url)), init),
    });
    keySets.set(teamOrigin, keySet);
  }
  return keySet;
}

/** Errors that say the token is wrong, as opposed to the certificates being out of reach. */
const TOKEN_ERRORS = [
  errors.JWSInvalid,
  errors.JWTInvalid,
  errors.JWSSignatureVerificationFailed,
  errors.JWTExpired,
  errors.JWTClaimValidationFailed,
  errors.JWKSNoMatchingKey,
  errors.JWKSMultipleMatchingKeys,
  errors.JOSEAlgNotAllowed,
  errors.JOSENotSupported,
];

export async function checkAccessToken(
  settings: { teamOrigin: string; audience: string },
  token: string,
): Promise<AccessTokenCheck> {
  let payload: JWTPayload;
  try {
    ({ payload } = await jwtVerify(token, keySetOf(settings.teamOrigin), {
      audience: settings.audience,
      issuer: settings.teamOrigin,
      algorithms: ["RS256"],
    }));
  } catch (error) {
    if (TOKEN_ERRORS.some((kind) => error instanceof kind))
      return { kind: "refused", reason: (error as errors.JOSEError).code };
    return { kind: "unavailable" };
  }
  const identity = identityOf(payload);
  return identity ? { kind: "verified", identity } : { kind: "refused", reason: "no_identity" };
}

/**
 * A user's token carries `email`, and `groups` when the identity provider passes them to Access (top-level, or
 * as a custom OIDC claim); a service token's carries `common_name`, its client id, and no email.
 */
function identityOf(payload: JWTPayload): AccessIdentity | null {
  if (typeof payload.email === "string" && payload.email.length > 0)
    return { kind: "user", email: payload.email, groups: groupsOf(payload) };
  if (typeof payload.common_name === "string" && payload.common_name.length > 0)
    return { kind: "service", clientId: payload.common_name };
  return null;
}

function groupsOf(payload: JWTPayload): string[] {
  const custom = payload.custom as { groups?: unknown } | undefined;
  const listed = [payload.groups, custom?.groups].flatMap((groups) => (Array.isArray(groups) ? groups : []));
  return listed.filter((group): group is string => typeof group === "string");
}
