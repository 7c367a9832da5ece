import { eq } from "drizzle-orm";
import { database } from "../db/client";
import { reconcileRuns } from "../db/schema";
import { logError, logEvent } from "../lib/log";
import { ulid } from "../lib/ulid";
import type { SourceConfig } from "../sources/config";
import { loadSources } from "../sources/registry";
import { applyConditions, sendAlertNotices, type AlertCondition, type NotifyCounts } from "./alerts";
import { catchUp, type CatchUpCounts } from "./catch-up";
import { reenqueueOverdue, returnExpiredLeases, sweepShards, type ShardSweepCounts } from "./redrive";
import { applyRetention, type RetentionCounts } from "./retention";
import { catchUpSettings } from "../sources/reconciler-settings";
import { catchUpMissing, watchSources } from "./watch";

/**
 * One cron run of the reconciler: re-drive stuck work, apply retention, catch up with provider APIs, evaluate
 * alerts. Each step is bounded (fixed batch sizes and page budgets), safe to run twice at once, and isolated: a
 * failing step or source is recorded and the others still run. The run's counts land in `reconcile_runs`.
 */

export interface ReconcileCounts {
  shards: ShardSweepCounts & { shardsFailed: number };
  redrive: { overdueReenqueued: number; expiredLeasesReturned: number };
  retention: RetentionCounts;
  catchUp: Record<string, CatchUpCounts>;
  alerts: { opened: number; resolved: number; notices: NotifyCounts };
  /** Wall-clock milliseconds per step, summed over sources. */
  durationsMs: Record<string, number>;
}

export interface StepFailure {
  step: string;
  source: string | null;
  error: string;
}

export interface ReconcileReport {
  runId: string;
  counts: ReconcileCounts;
  failures: StepFailure[];
}

export async function runReconcile(env: Env, options: { now: number }): Promise<ReconcileReport> {
  const { now } = options;
  const runId = ulid(now);
  const startedAt = Date.now();
  const db = database(env);
  await db.insert(reconcileRuns).values({ runId, clock: now, startedAt });

  const counts: ReconcileCounts = {
    shards: { shardsVisited: 0, shardsTotal: 0, claimsRelayed: 0, claimsStillUnrelayed: 0, shardKeysExpired: 0, shardsFailed: 0 },
    redrive: { overdueReenqueued: 0, expiredLeasesReturned: 0 },
    retention: { bodiesDropped: 0, quarantineBodiesDropped: 0, keysExpired: 0, runsForgotten: 0, caughtUp: true },
    catchUp: {},
    alerts: { opened: 0, resolved: 0, notices: { sent: 0, logged: 0, failed: 0 } },
    durationsMs: {},
  };
  const failures: StepFailure[] = [];
  const attempt = async (step: string, source: string | null, work: () => Promise<void>): Promise<boolean> => {
    const stepStartedAt = Date.now();
    try {
      await work();
      return true;
    } catch (error) {
      const message = (error instanceof Error ? `${error.name}: ${error.message}` : String(error)).slice(0, 300);
      failures.push({ step, source, error: message });
      logError("reconcile.step_failed", error, { run: runId, step, source });
      return false;
    } finally {
      counts.durationsMs[step] = (counts.durationsMs[step] ?? 0) + Date.now() - stepStartedAt;
    }
  };

  let sources: SourceConfig[] = [];
  await attempt("config", null, async () => {
    sources = [...loadSources(env).values()];
  });

  // The shard sweep goes first: it brings D1 up to date (relaying what the shards still hold) for every later step.
  await attempt("shards", null, async () => {
    counts.shards = await sweepShards(env, sources, now);
  });
  await attempt("redrive.overdue", null, async () => {
    counts.redrive.overdueReenqueued = await reenqueueOverdue(env, now);
  });
  await attempt("redrive.leases", null, async () => {
    counts.redrive.expiredLeasesReturned = await returnExpiredLeases(env, now);
  });
  await attempt("retention", null, async () => {
    counts.retention = await applyRetention(env, sources, now);
  });

  const conditions: AlertCondition[] = [];
  for (const source of sources) {
    const settings = catchUpSettings(source);
    if (!settings) continue;
    if (!settings.ok) {
      failures.push({ step: "catch-up", source: source.name, error: settings.problems.join("; ") });
      continue;
    }
    await attempt("catch-up", source.name, async () => {
      const found = await catchUp(env, source, settings.value, now);
      counts.catchUp[source.name] = found;
      conditions.push(catchUpMissing(source, found));
    });
  }

  await attempt("alerts", null, async () => {
    conditions.push(...(await watchSources(env, sources, now)));
    const changed = await applyConditions(env, conditions, now);
    counts.alerts.opened = changed.opened;
    counts.alerts.resolved = changed.resolved;
  });
  await attempt("alerts.notify", null, async () => {
    counts.alerts.notices = await sendAlertNotices(env, now);
  });

  const finishedAt = Date.now();
  await db
    .update(reconcileRuns)
    .set({ finishedAt, counts: JSON.stringify(counts), failures: failures.length > 0 ? JSON.stringify(failures) : null })
    .where(eq(reconcileRuns.runId, runId));
  logEvent("reconcile.run", {
    run: runId,
    durationMs: finishedAt - startedAt,
    failures: failures.length,
    claimsRelayed: counts.shards.claimsRelayed,
    overdueReenqueued: counts.redrive.overdueReenqueued,
    expiredLeasesReturned: counts.redrive.expiredLeasesReturned,
    bodiesDropped: counts.retention.bodiesDropped,
    keysExpired: counts.retention.keysExpired,
    missingClaimed: Object.values(counts.catchUp).reduce((sum, found) => sum + found.missingClaimed, 0),
    alertsOpened: counts.alerts.opened,
    alertsResolved: counts.alerts.resolved,
    durations: Object.entries(counts.durationsMs).map(([step, ms]) => `${step}:${ms}`).join(" "),
  });
  return { runId, counts, failures };
}
