import { Hono } from "hono";
import { listOperatorActions, parseAuditLogQuery } from "../audit-log/list";
import type { AdminEnv } from "../guards/auth";

/**
 * /admin/api/audit-log — the operator audit log, newest first: `before` (a page's nextCursor), `limit`, and the
 * filters `actor`, `action`, `outcome` (allowed or refused). Every role may read it. Mounted by ./index.ts.
 */
export const auditLogApi = new Hono<AdminEnv>();

auditLogApi.get("/", async (c) => c.json(await listOperatorActions(c.env, parseAuditLogQuery(c.req.query()))));
