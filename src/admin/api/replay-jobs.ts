import { type Context, Hono } from "hono";
import { apiError } from "../../lib/errors";
import { logEvent } from "../../lib/log";
import { JobFilterError } from "../../replay/replay-filter";
import { dryRun, JobConflictError, type JobView, jobView, startJob } from "../../replay/replay-jobs";
import { recordAllowed, requireRole } from "../access/require-role";
import { parseReplayJobRequest } from "../actions/replay-job-request";
import { filterTarget } from "../audit-log/targets";
import type { Role } from "../guards/actor";
import type { AdminEnv } from "../guards/auth";

/**
 * /admin/api/replays — bulk replay jobs (docs/operating.md, "Bulk replay by filter"). POST {filter, dryRun} answers a
 * dry run's count and sample, or starts one job (idempotent by `jobKey`) and answers its progress; GET /:jobKey
 * answers a job's progress. Mounted behind requireBearer by ./index.ts.
 */
export const replayJobsApi = new Hono<AdminEnv>();

/**
 * A dry run writes nothing, so any role may ask for one (a viewer can size a replay and hand it to an operator);
 * starting the job is an operator's. Read from the body as sent: a body that is not a dry run needs the operator.
 */
async function roleForJobRequest(c: Context<AdminEnv>): Promise<Role> {
  const body: unknown = await c.req.json().catch(() => null);
  return body && typeof body === "object" && (body as { dryRun?: unknown }).dryRun === true ? "viewer" : "operator";
}

replayJobsApi.post("/", requireRole(roleForJobRequest, "bulk-replay"), async (c) => {
  let body: unknown;
  try {
    body = await c.req.json();
  } catch {
    throw apiError(400, "invalid_body", 'Send a JSON object: {"filter": {"source": "..."}, "dryRun": true}.');
  }
  const request = parseReplayJobRequest(body);
  try {
    if (request.dryRun) return c.json({ dryRun: true, ...(await dryRun(c.env, request.filter)) });
    const job = await startJob(c.env, { filter: request.filter, jobKey: request.jobKey, origin: "api" });
    logEvent("admin.replay", { mode: "job", job: job.jobKey, source: job.source, route: job.route ?? undefined });
    await recordJobStart(c, job);
    return c.json({ job }, 202);
  } catch (error) {
    throw jobError(error);
  }
});

replayJobsApi.get("/:jobKey", async (c) => {
  const job = await jobView(c.env, c.req.param("jobKey"));
  if (!job) throw apiError(404, "job_not_found", "No replay job has that key.");
  return c.json({ job });
});

/** A job request's refusal as the API answers it; anything else is thrown on. */
export function jobError(error: unknown): unknown {
  if (error instanceof JobFilterError) return apiError(400, "invalid_body", `Replay filter: ${error.message}.`);
  if (error instanceof JobConflictError) return apiError(409, "job_conflict", `${error.message}.`);
  return error;
}

/** The audit log's row of a started job (a job key started again is recorded again, with what it has replayed by then). */
export function recordJobStart(c: Context<AdminEnv>, job: JobView): Promise<void> {
  const { filter } = job;
  const scope = filterTarget(
    { source: filter.source, eventType: filter.eventType, receivedFrom: filter.since, receivedBefore: filter.until },
    filter.route,
  );
  const error = filter.error === undefined ? "" : `, error "${filter.error}"`;
  return recordAllowed(c, "bulk-replay", `job ${job.jobKey}: ${scope}, status ${filter.status}${error}`, job.replayed);
}
