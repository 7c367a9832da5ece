import type { Context, MiddlewareHandler } from "hono";
import { apiError } from "../../lib/errors";
import { type OperatorAction, recordOperatorAction } from "../audit-log/record";
import { type Role, roleAllows } from "../guards/actor";
import type { AdminEnv } from "../guards/auth";

/** The action a route group performs: fixed, or read from the request (the dead letters form names its action). */
type ActionOf = OperatorAction | ((c: Context<AdminEnv>) => OperatorAction | Promise<OperatorAction>);

/**
 * The one role check, mounted per route group: an actor whose role is below `needed` is refused 403 before the
 * action runs, and the refusal is written to the audit log (the action, the path it was asked on, nothing
 * affected). Reads need no check beyond signing in: every role may read.
 * @example
 *   adminApi.post("/dead/replay", requireRole("operator", "replay"), handler);
 */
export function requireRole(needed: Role, action: ActionOf): MiddlewareHandler<AdminEnv> {
  return async (c, next) => {
    const actor = c.get("actor");
    if (!roleAllows(actor.role, needed)) {
      await recordOperatorAction(c.env, {
        actor,
        action: typeof action === "function" ? await action(c) : action,
        target: c.req.path,
        affected: 0,
        outcome: "refused",
      });
      throw apiError(403, "forbidden_for_role", `This needs the ${needed} role; ${actor.name} is a ${actor.role}.`);
    }
    await next();
  };
}
