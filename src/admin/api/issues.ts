import { type Context, Hono } from "hono";
import { apiError } from "../../lib/errors";
import { recordAllowed, requireRole } from "../access/require-role";
import { changeIssue, issueNote, listIssues } from "../actions/issues";
import type { AdminEnv } from "../guards/auth";
import { describeUnknown } from "../receipts/filters";

/**
 * /admin/api/issues — what the receiver found wrong and is watching (docs/operating.md "Issues and notices"):
 *   GET  /admin/api/issues[?all=1]                    open and acknowledged issues (all=1: resolved ones too),
 *                                                     each with its history, and each notice channel's state;
 *   POST /admin/api/issues/:issueKey/acknowledge      {"note": "..."} (required);
 *   POST /admin/api/issues/:issueKey/resolve          {"note": "..."} (optional).
 * Mounted behind the sign-in by ./index.ts; acknowledging and resolving need the operator role, and each is written
 * to the audit log.
 */
export const issuesApi = new Hono<AdminEnv>();

issuesApi.get("/", async (c) => {
  const all = c.req.query("all");
  if (all !== undefined && all !== "1" && all !== "true")
    throw apiError(400, "invalid_query", 'Query parameter "all" is 1 (or true) to list resolved issues too.');
  return c.json(await listIssues(c.env, { all: all !== undefined }));
});

const issueChange = (c: Context<AdminEnv>) => c.req.param("change") as "acknowledge" | "resolve";

issuesApi.post("/:issueKey/:change{acknowledge|resolve}", requireRole("operator", issueChange), async (c) => {
  const change = issueChange(c);
  const body = await noteBody(c.req.raw);
  const note = issueNote(body.note, change === "acknowledge");
  const issue = await changeIssue(c.env, c.req.param("issueKey"), change, note);
  await recordAllowed(c, change, `issue ${c.req.param("issueKey")}`, 1);
  return c.json({ issue });
});

async function noteBody(request: Request): Promise<{ note?: unknown }> {
  const usage = 'Send a JSON object {"note": "..."}.';
  const text = await request.text();
  if (text.trim() === "") return {};
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw apiError(400, "invalid_body", usage);
  }
  if (!body || typeof body !== "object" || Array.isArray(body)) throw apiError(400, "invalid_body", usage);
  const unknown = Object.keys(body).filter((key) => key !== "note");
  if (unknown.length > 0) throw apiError(400, "unknown_key", describeUnknown("key", unknown, ["note"]));
  return body as { note?: unknown };
}
