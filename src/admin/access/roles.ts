import { ROLES, type Role } from "../guards/actor";

/**
 * ACCESS_ROLES: which Access identities hold which role, a table in wrangler.toml's [vars]:
 *
 *   [vars.ACCESS_ROLES]
 *   admin = ["alice@example.com"]
 *   operator = ["group:oncall", "service:4f1c…access"]
 *   viewer = ["group:engineering"]
 *
 * An entry is an email (compared case-insensitively), "group:<name>" (a group the identity's token lists), or
 * "service:<client id>" (an Access service token, whose token names it in `common_name` and carries no email).
 * An identity listed under several roles holds the highest; one listed nowhere holds none and is refused: the
 * default is deny. Pure: the config is read once per request by ./access-settings.ts.
 */

export interface RoleRules {
  /** Each role's entries, lowercased. */
  readonly entries: Readonly<Record<Role, readonly string[]>>;
}

/** What a verified Access token says about its holder (./access-token.ts). */
export type AccessIdentity =
  | { kind: "user"; email: string; groups: readonly string[] }
  | { kind: "service"; clientId: string };

const ENTRY = /^(group:.+|service:.+|[^\s@:]+@[^\s@]+)$/;

/** The rules, or every problem with the table (unknown roles, entries that are none of the three forms). */
export function parseAccessRoles(raw: unknown): { rules: RoleRules } | { problems: string[] } {
  let table = raw;
  if (typeof raw === "string") {
    try {
      table = JSON.parse(raw);
    } catch {
      return { problems: ["ACCESS_ROLES is not a table (nor JSON of one)."] };
    }
  }
  if (table === undefined || table === null)
    return { problems: ["ACCESS_ROLES is not set, so no identity has a role."] };
  if (typeof table !== "object" || Array.isArray(table))
    return { problems: ["ACCESS_ROLES must be a table: admin, operator and viewer, each a list of entries."] };
  const problems: string[] = [];
  const entries: Record<Role, string[]> = { viewer: [], operator: [], admin: [] };
  for (const [role, list] of Object.entries(table)) {
    if (!(ROLES as readonly string[]).includes(role)) {
      problems.push(`ACCESS_ROLES has no role ${JSON.stringify(role)}: the roles are ${ROLES.join(", ")}.`);
      continue;
    }
    if (!Array.isArray(list)) {
      problems.push(`ACCESS_ROLES.${role} must be a list of emails, "group:<name>" or "service:<client id>".`);
      continue;
    }
    for (const entry of list) {
      if (typeof entry === "string" && ENTRY.test(entry.trim())) entries[role as Role].push(entry.trim().toLowerCase());
      else
        problems.push(
          `ACCESS_ROLES.${role} entry ${JSON.stringify(entry)} is not an email, "group:<name>" or "service:<client id>".`,
        );
    }
  }
  return problems.length > 0 ? { problems } : { rules: { entries } };
}

/** The names an identity answers to in ACCESS_ROLES, lowercased. */
function namesOf(identity: AccessIdentity): string[] {
  if (identity.kind === "service") return [`service:${identity.clientId.toLowerCase()}`];
  return [identity.email.toLowerCase(), ...identity.groups.map((group) => `group:${group.toLowerCase()}`)];
}

/** The highest role any of the identity's names is listed under, or null (refused). */
export function roleOf(identity: AccessIdentity, rules: RoleRules): Role | null {
  const names = namesOf(identity);
  for (const role of [...ROLES].reverse()) {
    if (rules.entries[role].some((entry) => names.includes(entry))) return role;
  }
  return null;
}

/** How the audit log and error messages name an identity. */
export function identityName(identity: AccessIdentity): string {
  return identity.kind === "service" ? `service:${identity.clientId}` : identity.email;
}
