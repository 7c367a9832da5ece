import { secretValue } from "../../lib/secrets";
import { parseAccessRoles, type RoleRules } from "./roles";

/**
 * Sign-in through Cloudflare Access (docs/operating.md, "Access, roles and the audit log"): on when both
 * ACCESS_TEAM_DOMAIN and ACCESS_AUD are set. Only the team's own host is ever asked for certificates: the domain
 * must be `<team>.cloudflareaccess.com`, so a mistyped setting cannot point key fetches anywhere else.
 */
export type AccessSettings =
  | { kind: "off" }
  | { kind: "invalid"; problems: string[] }
  | {
      kind: "on";
      /** https://<team>.cloudflareaccess.com: the tokens' issuer, and the host of their certificates. */
      teamOrigin: string;
      audience: string;
      rules: RoleRules;
    };

const TEAM_DOMAIN = /^(?:https:\/\/)?([a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.cloudflareaccess\.com)\/?$/;

export function accessSettings(env: object): AccessSettings {
  const domain = secretValue(env, "ACCESS_TEAM_DOMAIN");
  const audience = secretValue(env, "ACCESS_AUD");
  if (domain === null && audience === null) return { kind: "off" };
  const problems: string[] = [];
  if (domain === null) problems.push("ACCESS_AUD is set but ACCESS_TEAM_DOMAIN is not: set both, or neither.");
  if (audience === null) problems.push("ACCESS_TEAM_DOMAIN is set but ACCESS_AUD is not: set both, or neither.");
  const host = domain === null ? null : TEAM_DOMAIN.exec(domain.trim().toLowerCase())?.[1];
  if (domain !== null && !host)
    problems.push(`ACCESS_TEAM_DOMAIN must be your team's <team>.cloudflareaccess.com, not ${JSON.stringify(domain)}.`);
  const roles = parseAccessRoles((env as Record<string, unknown>).ACCESS_ROLES);
  if ("problems" in roles) problems.push(...roles.problems);
  if (problems.length > 0 || !host || audience === null || "problems" in roles) return { kind: "invalid", problems };
  return { kind: "on", teamOrigin: `https://${host}`, audience, rules: roles.rules };
}
