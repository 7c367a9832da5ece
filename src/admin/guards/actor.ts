/**
 * Who is asking, once signed in, and what they may do. The ADMIN_TOKEN (bearer or dashboard session) is an admin;
 * a Cloudflare Access identity has the role ACCESS_ROLES gives it (src/admin/access/roles.ts). Roles are ordered:
 * each may do everything the ones below it may.
 *   viewer    reads: receipts, dead letters, stats, health, the audit log
 *   operator  replay, dismiss and restore, pause and resume a route, acknowledge and resolve an issue
 *   admin     approve and revoke kept secrets, and whatever changes config
 */
export const ROLES = ["viewer", "operator", "admin"] as const;
export type Role = (typeof ROLES)[number];

/** Which door the request came through: the JSON API (the CLI and scripts too) or the dashboard. */
export type ActorDoor = "api" | "dashboard";

export interface Actor {
  /** The Access email, "service:<client id>" for an Access service token, or "admin-token". */
  name: string;
  role: Role;
  via: ActorDoor;
}

/** The name every holder of ADMIN_TOKEN shares: the token says nothing more about who holds it. */
export const ADMIN_TOKEN_ACTOR = "admin-token";

export function roleAllows(held: Role, needed: Role): boolean {
  return ROLES.indexOf(held) >= ROLES.indexOf(needed);
}
