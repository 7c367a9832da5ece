import { desc, eq } from "drizzle-orm";
import { database } from "../db/client";
import { replayJobs } from "../db/schema";
import { plural } from "../lib/plural";
import type { Issue, IssueCondition } from "../monitor/issues/types";
import type { SourceConfig } from "../sources/config";
import { receiptDatabaseEnvs } from "../sources/databases";

/**
 * A route's recovery keeps its breaker-open issue open (docs/operating.md, "Recovery when a route's breaker closes"):
 * with `recover = "auto"`, the issue is not over when the breaker closes but when the replay job the closing started
 * (src/replay/route-recovery.ts) is done. The cron reads the recent recovery jobs from D1 (their rows already exist:
 * no new write path) and hands them to the system monitor; while the job runs the issue names it and its counts, and
 * it resolves with what the job re-drove. The monitor's own evaluations (a breaker's report, signature counts) read
 * no D1: they leave such an issue as it is, so a close seen before its job exists never resolves and reopens it.
 */

export interface RecoveryProgress {
  source: string;
  route: string;
  jobKey: string;
  state: "running" | "done";
  scanned: number;
  replayed: number;
  expired: number;
  createdAt: number;
}

/** The recent recovery jobs when the caller read them from D1; null when it did not (or the read failed). */
export type Recoveries = readonly RecoveryProgress[] | null;

/** Recovery jobs read per receipt database: the newest, however many routes recovered before. */
const RECENT_RECOVERY_JOBS = 100;

/**
 * How long after the cron first sees a closed breaker with no recovery job it keeps waiting for one: the consumer
 * starts the job just after the close, so a job still missing then was never started (it failed, and was logged).
 */
export const RECOVERY_START_GRACE_MS = 10 * 60_000;

/** The newest recovery jobs of every receipt database, one entry per job (its parts' counts summed). */
export async function recentRecoveries(env: Env): Promise<RecoveryProgress[]> {
  const byKey = new Map<string, RecoveryProgress>();
  for (const { env: databaseEnv } of receiptDatabaseEnvs(env)) {
    const rows = await database(databaseEnv)
      .select()
      .from(replayJobs)
      .where(eq(replayJobs.origin, "recovery"))
      .orderBy(desc(replayJobs.createdAt))
      .limit(RECENT_RECOVERY_JOBS);
    for (const row of rows) {
      if (row.route === null) continue;
      const seen = byKey.get(row.jobKey);
      byKey.set(row.jobKey, {
        source: row.source,
        route: row.route,
        jobKey: row.jobKey,
        state: seen?.state === "running" || row.state === "running" ? "running" : "done",
        scanned: (seen?.scanned ?? 0) + row.scanned,
        replayed: (seen?.replayed ?? 0) + row.replayed,
        expired: (seen?.expired ?? 0) + row.expired,
        createdAt: Math.min(seen?.createdAt ?? row.createdAt, row.createdAt),
      });
    }
  }
  return [...byKey.values()];
}

/** The routes configured with `recover = "auto"`, as `source/route`. */
export function recoveringRoutes(sources: Iterable<SourceConfig>): Set<string> {
  const routes = new Set<string>();
  for (const source of sources)
    for (const { rules } of source.routes) if (rules.control?.recover) routes.add(`${source.name}/${rules.name}`);
  return routes;
}

export function recoveryStartingMessage(route: string): string {
  return `The circuit breaker of route ${route} closed; its recovery job is starting.`;
}

/**
 * Which breaker-open issues a recovery keeps open (as conditions firing with their recovery's message), and the
 * resolution detail of those whose recovery is over. `recoveries` is null when the caller read no D1: an issue a
 * recovery may still hold then stays exactly as it is. Pure: the system monitor's issue desk applies it.
 */
export function recoveryHolds(
  issues: readonly Issue[],
  firing: readonly IssueCondition[],
  recovering: ReadonlySet<string>,
  recoveries: readonly RecoveryProgress[] | null,
  now: number,
): { firing: IssueCondition[]; resolutions: Map<string, string> } {
  const held: IssueCondition[] = [];
  const resolutions = new Map<string, string>();
  const breakerFiring = new Set(
    firing.filter((condition) => condition.kind === "breaker-open").map((c) => `${c.source}/${c.route}`),
  );
  for (const issue of issues) {
    if (issue.kind !== "breaker-open" || issue.state === "resolved" || issue.route === null) continue;
    const routeKey = `${issue.source}/${issue.route}`;
    if (breakerFiring.has(routeKey) || !recovering.has(routeKey)) continue;
    const keep = (message: string) =>
      held.push({
        kind: "breaker-open",
        source: issue.source,
        route: issue.route,
        store: null,
        severity: issue.severity,
        message,
      });
    if (recoveries === null) {
      keep(issue.message);
      continue;
    }
    // This episode's job: a recovery started before the issue opened belongs to an earlier one.
    const job = recoveries
      .filter((r) => `${r.source}/${r.route}` === routeKey && r.createdAt >= issue.openedAt)
      .sort((a, b) => b.createdAt - a.createdAt)[0];
    if (job?.state === "running") {
      keep(
        `The circuit breaker of route ${issue.route} closed; recovering: job ${job.jobKey} re-drove ${plural(job.replayed, "dead delivery", "dead deliveries")} so far (${plural(job.scanned, "receipt", "receipts")} scanned).`,
      );
    } else if (job !== undefined) {
      const expired = job.expired > 0 ? `; ${job.expired} past payload retention, not sent` : "";
      resolutions.set(
        issue.issueKey,
        `Recovered: job ${job.jobKey} re-drove ${plural(job.replayed, "dead delivery", "dead deliveries")} (${plural(job.scanned, "receipt", "receipts")} scanned${expired}).`,
      );
    } else if (
      issue.message !== recoveryStartingMessage(issue.route) ||
      now - issue.updatedAt < RECOVERY_START_GRACE_MS
    ) {
      keep(recoveryStartingMessage(issue.route));
    } else {
      resolutions.set(
        issue.issueKey,
        "The circuit breaker closed; no recovery job started (see the gate.recovery_failed log).",
      );
    }
  }
  return { firing: held, resolutions };
}
