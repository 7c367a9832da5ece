import { type Context, Hono } from "hono";
import { requireRole } from "../access/require-role";
import { changeIssue, issueNote, listIssues } from "../actions/issues";
import { recordOperatorAction } from "../audit-log/record";
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
  return c.html(<IssuesPage listing={listing} all={all} flash={takeFlash(c)} />);
});

const issueChange = (c: Context<AdminEnv>) => c.req.param("change") as "acknowledge" | "resolve";

issuePages.post("/issues/:issueKey/:change{acknowledge|resolve}", requireRole("operator", issueChange), async (c) => {
  const change = issueChange(c);
  const form = await c.req.parseBody();
  const note = issueNote(form.note, change === "acknowledge");
  const issue = await changeIssue(c.env, c.req.param("issueKey"), change, note);
  await recordOperatorAction(c.env, {
    actor: c.get("actor"),
    action: change,
    target: `issue ${issue.issueKey}`,
    affected: 1,
    outcome: "allowed",
  });
  setFlash(c, `Issue ${issue.issueKey} ${change === "acknowledge" ? "acknowledged" : "resolved"}.`);
  return c.redirect("/admin/issues", 303);
});
