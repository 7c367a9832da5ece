import { type Context, Hono } from "hono";
import { ApiError, apiError } from "../../lib/errors";
import { dryRun, jobView, startJob } from "../../replay/replay-jobs";
import { requireRole } from "../access/require-role";
import { JOB_FILTER_KEYS, parseJobFilter } from "../actions/replay-job-request";
import { jobError, recordJobStart } from "../api/replay-jobs";
import type { Role } from "../guards/actor";
import type { AdminEnv } from "../guards/auth";
import { ReplayDryRunPage, ReplayJobPage } from "./pages/replay-job";

/** The dashboard's bulk replay by filter: the receipts page's form posts here (./pages/replay-job.tsx). */
export const replayJobPages = new Hono<AdminEnv>();

/** As in the API: any role may ask for a dry run (it writes nothing); the form's Replay is an operator's. */
async function roleForForm(c: Context<AdminEnv>): Promise<Role> {
  return (await c.req.parseBody()).intent === "replay" ? "operator" : "viewer";
}

replayJobPages.post("/replays", requireRole(roleForForm, "bulk-replay"), async (c) => {
  const form = await c.req.parseBody();
  const query: Record<string, string | undefined> = {};
  for (const name of JOB_FILTER_KEYS) {
    const value = form[name];
    if (typeof value === "string" && value.trim() !== "") query[name] = value.trim();
  }
  try {
    const filter = parseJobFilter(query);
    if (form.intent !== "replay")
      return c.html(<ReplayDryRunPage query={query} dryRun={await dryRun(c.env, filter)} role={c.get("actor").role} />);
    const job = await startJob(c.env, { filter, origin: "dashboard" });
    await recordJobStart(c, job);
    return c.redirect(`/admin/replays/${encodeURIComponent(job.jobKey)}`, 303);
  } catch (error) {
    const refused = jobError(error);
    if (!(refused instanceof ApiError) || refused.status !== 400) throw refused;
    return c.html(
      <ReplayDryRunPage query={query} dryRun={null} role={c.get("actor").role} problem={refused.message} />,
      400,
    );
  }
});

replayJobPages.get("/replays/:jobKey", async (c) => {
  const job = await jobView(c.env, c.req.param("jobKey"));
  if (!job) throw apiError(404, "job_not_found", "No replay job has that key.");
  return c.html(<ReplayJobPage job={job} />);
});
