import type { Context, MiddlewareHandler } from "hono";
import { apiError } from "../../lib/errors";
import { type Actor, type ActorDoor, ADMIN_TOKEN_ACTOR } from "../guards/actor";
import { type AdminEnv, hasSession, requireBearer } from "../guards/auth";
import { accessSettings } from "./access-settings";
import { ACCESS_ASSERTION_HEADER, checkAccessToken } from "./access-token";
import { identityName, roleOf } from "./roles";

/**
 * Who is asking, for /admin: the ADMIN_TOKEN (bearer for the API, session cookie for the dashboard) signs in as an
 * admin, as before; with Cloudflare Access on (./access-settings.ts), a request carrying Access's assertion and no
 * bearer token signs in as its Access identity, with the role ACCESS_ROLES gives it (./roles.ts). Either way the
 * actor is set on the context for ./require-role.ts and the audit log. Access off, the assertion header is ignored.
 */

/** The Access identity behind an assertion, as an actor with its role; else the 4xx or 503 saying why not. */
async function accessActor(c: Context<AdminEnv>, assertion: string, via: ActorDoor): Promise<Actor> {
  const settings = accessSettings(c.env);
  if (settings.kind === "invalid")
    throw apiError(
      503,
      "access_config_invalid",
      `Cloudflare Access sign-in is misconfigured: ${settings.problems.join(" ")}`,
    );
  if (settings.kind === "off") throw new Error("accessActor called with Access off");
  const check = await checkAccessToken(settings, assertion);
  if (check.kind === "unavailable")
    throw apiError(
      503,
      "access_certs_unavailable",
      "The Access team's signing keys could not be fetched; retry shortly.",
    );
  if (check.kind === "refused")
    throw apiError(401, "access_token_invalid", "The Cloudflare Access token is not valid for this application.");
  const role = roleOf(check.identity, settings.rules);
  const name = identityName(check.identity);
  if (role === null)
    throw apiError(
      403,
      "no_role",
      `${name} signed in through Access but holds no role here: an admin adds it to ACCESS_ROLES.`,
    );
  return { name, role, via };
}

/** The Access assertion to sign in with: only when Access is configured (or misconfigured, to say so). */
function accessAssertion(c: Context<AdminEnv>): string | null {
  const assertion = c.req.header(ACCESS_ASSERTION_HEADER);
  return assertion !== undefined && accessSettings(c.env).kind !== "off" ? assertion : null;
}

/** /admin/api: a bearer token is the ADMIN_TOKEN's door (../guards/auth.ts); without one, Access's assertion. */
export const signInApi: MiddlewareHandler<AdminEnv> = async (c, next) => {
  const assertion = accessAssertion(c);
  if (assertion === null || c.req.header("authorization") !== undefined) return requireBearer(c, next);
  c.set("actor", await accessActor(c, assertion, "api"));
  await next();
  // Answers carry payload bodies: no shared cache may keep them.
  c.header("cache-control", "no-store");
};

/** The dashboard's pages: the signed-in session, else Access's assertion, else off to the sign-in form. */
export const signInDashboard: MiddlewareHandler<AdminEnv> = async (c, next) => {
  if (await hasSession(c)) {
    c.set("actor", { name: ADMIN_TOKEN_ACTOR, role: "admin", via: "dashboard" });
    return next();
  }
  const assertion = accessAssertion(c);
  if (assertion !== null) {
    c.set("actor", await accessActor(c, assertion, "dashboard"));
    return next();
  }
  if (c.req.method === "GET") return c.redirect("/admin/login", 303);
  throw apiError(401, "unauthorized", "Sign in first.");
};
