import { Hono } from "hono";
import { AUDIT_LOG_PARAMETERS, listOperatorActions, parseAuditLogQuery } from "../audit-log/list";
import type { AdminEnv } from "../guards/auth";
import { rejectUnknownParameters } from "../receipts/filters";
import { AuditLogPage } from "./pages/audit-log";

/** The dashboard's audit log page (../audit-log/): every role may read it. */
export const auditLogPages = new Hono<AdminEnv>();

auditLogPages.get("/audit-log", async (c) => {
  const query = c.req.query();
  rejectUnknownParameters(query, AUDIT_LOG_PARAMETERS);
  const parsed = parseAuditLogQuery(query);
  return c.html(<AuditLogPage page={await listOperatorActions(c.env, parsed)} query={parsed} />);
});
