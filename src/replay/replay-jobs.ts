import { and, asc, eq } from "drizzle-orm";
import { database } from "../db/client";
import { replayJobs } from "../db/schema";
import { logEvent } from "../lib/log";
import { ulid } from "../lib/ulid";
import { receiptDatabaseEnvs } from "../sources/databases";
import { loadSources } from "../sources/registry";
import { bodyStillKept } from "./replay-body";
import { checkJobFilter, JobFilterError, type ReplayChoice, type ReplayJobFilter } from "./replay-filter";
import { JOB_PAGE, type JobRow, readPage, stepJob } from "./replay-job-step";

/**
 * Bulk replay jobs (docs/operating.md, "Bulk replay by filter"): a filter over one source's receipts, walked once in
 * received order in bounded steps (replay-job-step.ts), its progress a row in each receipt database. Started by the
 * admin API (the CLI, the dashboard) or by a route's recovery; the first steps run at once, the cron runs the rest,
 * so a job outlives a crash or a redeploy. A dry run walks the same pages and writes nothing.
 */

export type JobOrigin = JobRow["origin"];

/** Steps run when a job starts: a small job is done before its start is answered. */
export const STEPS_AT_START = 5;
/** Steps per running job per database in one cron run: counted work, never a clock. */
export const STEPS_PER_CRON_RUN = 20;
/** A dry run reads at most this many pages per database; past that its count is a lower bound. */
const DRY_RUN_PAGES = 25;
const SAMPLE_SIZE = 10;
const JOB_KEY = /^[A-Za-z0-9_.:-]{1,80}$/;

/** A job key already names a job with another filter. */
export class JobConflictError extends Error {
  override name = "JobConflictError";
}

export interface JobView {
  jobKey: string;
  source: string;
  route: string | null;
  filter: ReplayJobFilter;
  origin: JobOrigin;
  state: "running" | "done";
  scanned: number;
  replayed: number;
  expired: number;
  createdAt: number;
  finishedAt: number | null;
  /** Each receipt database's part: its own cursor and counts. */
  databases: { binding: string; state: "running" | "done"; cursor: string | null; replayed: number }[];
}

/** A filter whose source (and route, when named) the config has: a job over anything else could only fail. */
export function checkConfigured(env: Env, filter: ReplayJobFilter): void {
  const config = loadSources(env).get(filter.source);
  if (!config) throw new JobFilterError(`no valid source ${JSON.stringify(filter.source)} is configured`);
  const names = config.routes.map(({ rules }) => rules.name);
  if (filter.route !== undefined && !names.includes(filter.route))
    throw new JobFilterError(
      `source ${JSON.stringify(filter.source)} has no route ${JSON.stringify(filter.route)} (its routes: ${names.join(", ")})`,
    );
}

/**
 * Starts a job (or finds the one `jobKey` already names with the same filter: starting twice is one job), runs its
 * first steps, and answers its progress.
 */
export async function startJob(
  env: Env,
  request: { filter: ReplayJobFilter; jobKey?: string; origin: JobOrigin },
  now = Date.now(),
): Promise<JobView> {
  const filter = checkJobFilter(request.filter);
  checkConfigured(env, filter);
  const jobKey = request.jobKey ?? `replay_${ulid(now)}`;
  if (!JOB_KEY.test(jobKey)) throw new JobFilterError("jobKey must be 1 to 80 letters, digits, or _ . : -");
  const text = JSON.stringify(filter);
  for (const { env: databaseEnv } of receiptDatabaseEnvs(env)) {
    const db = database(databaseEnv);
    await db
      .insert(replayJobs)
      .values({
        jobKey,
        source: filter.source,
        route: filter.route ?? null,
        filter: text,
        origin: request.origin,
        createdAt: now,
        updatedAt: now,
      })
      .onConflictDoNothing();
    const [row] = await db.select({ filter: replayJobs.filter }).from(replayJobs).where(eq(replayJobs.jobKey, jobKey));
    if (row?.filter !== text) throw new JobConflictError(`job ${jobKey} already exists with another filter`);
  }
  logEvent("replay.job_started", { job: jobKey, source: filter.source, route: filter.route, origin: request.origin });
  await advanceJob(env, jobKey, now, STEPS_AT_START);
  return (await jobView(env, jobKey))!;
}

/** Up to `steps` steps of one job in each receipt database. */
export async function advanceJob(env: Env, jobKey: string, now: number, steps: number): Promise<void> {
  for (const { env: databaseEnv } of receiptDatabaseEnvs(env)) {
    const [row] = await database(databaseEnv)
      .select()
      .from(replayJobs)
      .where(and(eq(replayJobs.jobKey, jobKey), eq(replayJobs.state, "running")));
    if (row) await stepRow(databaseEnv, row, now, steps);
  }
}

/** The cron's part (src/reconcile/reconcile.ts): every running job of this database, `steps` steps each. */
export async function advanceJobs(databaseEnv: Env, now: number, steps = STEPS_PER_CRON_RUN): Promise<number> {
  const running = await database(databaseEnv)
    .select()
    .from(replayJobs)
    .where(eq(replayJobs.state, "running"))
    .orderBy(asc(replayJobs.createdAt));
  let replayed = 0;
  for (const row of running) replayed += await stepRow(databaseEnv, row, now, steps);
  return replayed;
}

async function stepRow(databaseEnv: Env, first: JobRow, now: number, steps: number): Promise<number> {
  let row: JobRow | undefined = first;
  let replayed = 0;
  for (let step = 0; step < steps && row?.state === "running"; step++) {
    const result = await stepJob(databaseEnv, row, now, stepLimit(row));
    replayed += result.replayed;
    if (!result.moved || result.done) break;
    [row] = await database(databaseEnv).select().from(replayJobs).where(eq(replayJobs.jobKey, row.jobKey));
  }
  return replayed;
}

/**
 * How many deliveries a step may replay: a whole page for an operator's job; for a route's recovery, a ramp — what
 * it replayed so far, at least 10 — so a destination just back takes a few first, then twice as many each step.
 */
export function stepLimit(row: Pick<JobRow, "origin" | "replayed">): number {
  return row.origin === "recovery" ? Math.min(JOB_PAGE, Math.max(10, row.replayed)) : JOB_PAGE;
}

/** A job's progress over every receipt database; null when no database has it. */
export async function jobView(env: Env, jobKey: string): Promise<JobView | null> {
  const parts: { binding: string; row: JobRow }[] = [];
  for (const { binding, env: databaseEnv } of receiptDatabaseEnvs(env)) {
    const [row] = await database(databaseEnv).select().from(replayJobs).where(eq(replayJobs.jobKey, jobKey));
    if (row) parts.push({ binding, row });
  }
  const first = parts[0]?.row;
  if (!first) return null;
  const sum = (pick: (row: JobRow) => number) => parts.reduce((total, { row }) => total + pick(row), 0);
  const running = parts.some(({ row }) => row.state === "running");
  return {
    jobKey,
    source: first.source,
    route: first.route,
    filter: JSON.parse(first.filter) as ReplayJobFilter,
    origin: first.origin,
    state: running ? "running" : "done",
    scanned: sum((row) => row.scanned),
    replayed: sum((row) => row.replayed),
    expired: sum((row) => row.expired),
    createdAt: first.createdAt,
    finishedAt: running ? null : Math.max(...parts.map(({ row }) => row.finishedAt ?? 0)),
    databases: parts.map(({ binding, row }) => ({
      binding,
      state: row.state,
      cursor: row.cursor,
      replayed: row.replayed,
    })),
  };
}

export interface DryRun {
  /** Deliveries a job with this filter would replay now. */
  count: number;
  /** Matched, but past payload retention: a job would count them and send nothing. */
  expired: number;
  /** False when the walk stopped at its page budget: `count` is then a lower bound. */
  complete: boolean;
  sample: { receiptId: string; route: string | null; kind: ReplayChoice["kind"] }[];
}

/** What a job with `filter` would replay, counted over the same pages a job walks; writes nothing. */
export async function dryRun(env: Env, given: ReplayJobFilter, now = Date.now()): Promise<DryRun> {
  const filter = checkJobFilter(given);
  checkConfigured(env, filter);
  const answer: DryRun = { count: 0, expired: 0, complete: true, sample: [] };
  for (const { env: databaseEnv } of receiptDatabaseEnvs(env)) {
    let cursor: string | null = null;
    for (let pages = 0; ; pages++) {
      if (pages === DRY_RUN_PAGES) {
        answer.complete = false;
        break;
      }
      const { page, choices } = await readPage(databaseEnv, filter, cursor);
      const kept = new Set(page.filter((row) => bodyStillKept(databaseEnv, row, now)).map((row) => row.receiptId));
      for (const choice of choices) {
        if (!kept.has(choice.receiptId)) answer.expired++;
        else if (answer.count++ < SAMPLE_SIZE)
          answer.sample.push({
            receiptId: choice.receiptId,
            route: choice.kind === "receipt" ? (filter.route ?? null) : choice.route,
            kind: choice.kind,
          });
      }
      if (page.length < JOB_PAGE) break;
      cursor = page.at(-1)!.receiptId;
    }
  }
  return answer;
}
