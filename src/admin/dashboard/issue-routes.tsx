import { type Context, Hono } from "hono";
import { recordAllowed, requireRole } from "../access/require-role";
import { changeIssue, issueNote, listIssues } from "../actions/issues";
import type { AdminEnv } from "../guards/auth";
import { setFlash, takeFlash } from "./flash";
import { IssuesPage } from "./pages/issues";

/**
 * The dashboard's issues: the list, and the acknowledge and resolve forms (../actions/issues.ts does the work). As
 * in the API, a change needs the operator role and is written to the audit log.
 */
export const issuePages = new Hono<AdminEnv>();

issuePages.get("/issues", async (c) => {
  const all = c.req.query("all") !== undefined;
  const listing = await listIssues(c.env, { all });
  return c.html(<IssuesPage listing={listing} all={all} role={c.get("actor").role} flash={takeFlash(c)} />);
});

const issueChange = (c: Context<AdminEnv>) => c.req.param("change") as "acknowledge" | "resolve";

issuePages.post("/issues/:issueKey/:change{acknowledge|resolve}", requireRole("operator", issueChange), async (c) => {
  const change = issueChange(c);
  const form = await c.req.parseBody();
  const note = issueNote(form.note, change === "acknowledge");
  const issue = await changeIssue(c.env, c.req.param("issueKey"), change, note);
  await recordAllowed(c, change, `issue ${issue.issueKey}`, 1);
  setFlash(c, `Issue ${issue.issueKey} ${change === "acknowledge" ? "acknowledged" : "resolved"}.`);
  return c.redirect("/admin/issues", 303);
});
