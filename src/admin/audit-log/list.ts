import { and, desc, eq, lt } from "drizzle-orm";
import { database } from "../../db/client";
import { operatorActions } from "../../db/schema";
import { apiError } from "../../lib/errors";
import { isReceiptId, parseLimit, type Query } from "../receipts/filters";
import { OPERATOR_ACTIONS, type OperatorAction } from "./record";

/**
 * Reading the operator audit log, newest first, a page at a time: GET /admin/api/audit-log, the dashboard's
 * /admin/audit-log and `npm run cli -- audit-log`. Pages go along the primary key (a ULID minted at the action's
 * time), `before` the previous page's `nextCursor`.
 */

export type OperatorActionRow = typeof operatorActions.$inferSelect;

export interface AuditLogQuery {
  before?: string;
  limit: number;
  actor?: string;
  action?: OperatorAction;
  outcome?: "allowed" | "refused";
}

export interface AuditLogPage {
  actions: OperatorActionRow[];
  /** Send as `before` for the next (older) page; null on the last. */
  nextCursor: string | null;
}

export const AUDIT_LOG_PARAMETERS = ["before", "limit", "actor", "action", "outcome"] as const;

/** The query, strictly: a bad value is a 400 naming it. */
export function parseAuditLogQuery(query: Query): AuditLogQuery {
  const { before, actor, action, outcome } = query;
  if (before !== undefined && !isReceiptId(before))
    throw apiError(400, "invalid_query", 'Query parameter "before" must be a previous page\'s nextCursor.');
  if (action !== undefined && !(OPERATOR_ACTIONS as readonly string[]).includes(action))
    throw apiError(400, "invalid_query", `Query parameter "action" must be one of ${OPERATOR_ACTIONS.join(", ")}.`);
  if (outcome !== undefined && outcome !== "allowed" && outcome !== "refused")
    throw apiError(400, "invalid_query", 'Query parameter "outcome" must be allowed or refused.');
  return {
    limit: parseLimit(query),
    ...(before ? { before } : {}),
    ...(actor ? { actor } : {}),
    ...(action ? { action: action as OperatorAction } : {}),
    ...(outcome ? { outcome } : {}),
  };
}

export async function listOperatorActions(env: Env, query: AuditLogQuery): Promise<AuditLogPage> {
  const rows = await database(env)
    .select()
    .from(operatorActions)
    .where(
      and(
        query.before === undefined ? undefined : lt(operatorActions.actionId, query.before),
        query.actor === undefined ? undefined : eq(operatorActions.actor, query.actor),
        query.action === undefined ? undefined : eq(operatorActions.action, query.action),
        query.outcome === undefined ? undefined : eq(operatorActions.outcome, query.outcome),
      ),
    )
    .orderBy(desc(operatorActions.actionId))
    .limit(query.limit + 1);
  const actions = rows.slice(0, query.limit);
  return { actions, nextCursor: rows.length > query.limit ? (actions.at(-1)?.actionId ?? null) : null };
}
