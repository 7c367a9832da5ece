import type { Context, MiddlewareHandler } from "hono";
import { apiError } from "../../lib/errors";
import { type OperatorAction, recordOperatorAction } from "../audit-log/record";
import { type Role, roleAllows } from "../guards/actor";
import type { AdminEnv } from "../guards/auth";

/** Read from the request when it depends on what is asked (the dead letters form names its action). */
type FromRequest<T> = T | ((c: Context<AdminEnv>) => T | Promise<T>);

function resolve<T extends string>(c: Context<AdminEnv>, value: FromRequest<T>): T | Promise<T> {
  return typeof value === "function" ? value(c) : value;
}

/**
 * The one role check, mounted per route group: an actor whose role is below `needed` is refused 403 before the
 * action runs, and the refusal is written to the audit log (the action, the path it was asked on, nothing
 * affected). Reads need no check beyond signing in: every role may read. `needed` may depend on the request: a
 * bulk replay's dry run writes nothing, so any role may ask for one, while the replay itself is an operator's.
 * @example
 *   adminApi.post("/dead/replay", requireRole("operator", "replay"), handler);
 */
export function requireRole(
  needed: FromRequest<Role>,
  action: FromRequest<OperatorAction>,
): MiddlewareHandler<AdminEnv> {
  return async (c, next) => {
    const actor = c.get("actor");
    const role = await resolve(c, needed);
    if (!roleAllows(actor.role, role)) {
      await recordOperatorAction(c.env, {
        actor,
        action: await resolve(c, action),
        target: c.req.path,
        affected: 0,
        outcome: "refused",
      });
      throw apiError(403, "forbidden_for_role", `This needs the ${role} role; ${actor.name} is a ${actor.role}.`);
    }
    await next();
  };
}

/**
 * The audit log's row of an action `requireRole` let through, written once it ran: the signed-in actor, what it did,
 * to what, and how many things it changed. Every allowed action, through the API or the dashboard, is recorded here.
 * @example
 *   await recordAllowed(c, "dismiss", receiptsTarget(receiptIds), report.changed.length);
 */
export function recordAllowed(
  c: Context<AdminEnv>,
  action: OperatorAction,
  target: string,
  affected: number,
): Promise<void> {
  return recordOperatorAction(c.env, { actor: c.get("actor"), action, target, affected, outcome: "allowed" });
}
