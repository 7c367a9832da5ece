import type { Child } from "hono/jsx";
import { type Role, roleAllows } from "../guards/actor";

/**
 * A form only for the roles that may use it: a viewer shown a Replay button would only meet a 403 (and a refusal in
 * the audit log) on pressing it, so below the role the form needs, a short note says so instead. The routes still
 * check the role (../access/require-role.ts): this only stops offering what would be refused.
 *
 * @example
 *   <RoleGate role={props.role} needs="operator" doing="replay"><form …/></RoleGate>
 */
export function RoleGate(props: { role: Role; needs: Role; doing: string; children: Child }) {
  if (roleAllows(props.role, props.needs)) return <>{props.children}</>;
  return (
    <p class="muted role-note">
      Your role ({props.role}) can't {props.doing}.
    </p>
  );
}
