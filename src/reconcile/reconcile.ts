import { eq } from "drizzle-orm";
import { readProbeState, redriveHorizon, sendProbe } from "../consumers/queue/queue-probe";
import { database } from "../db/client";
import { reconcileRuns } from "../db/schema";
import { logError, logEvent } from "../lib/log";
import { ulid } from "../lib/ulid";
import { advanceJobs } from "../replay/replay-jobs";
import { DEFAULT_DATABASE_BINDING, type SourceConfig } from "../sources/config";
import { envForSource, receiptDatabaseEnvs } from "../sources/databases";
import { catchUpSettings } from "../sources/reconciler-settings";
import { loadSources } from "../sources/registry";
import { type AlertCondition, applyConditions, type NotifyCounts, sendAlertNotices } from "./alerting";
import { type CatchUpCounts, catchUp } from "./catch-up";
import { evaluateIssues } from "./issue-evaluation";
import { returnExpiredLeases } from "./lease-return";
import { forgetOldOperatorActions } from "./operator-actions-retention";
import { NO_PARTITION_COUNTS, type PartitionRingCounts, turnPartitionRing } from "./partition-drop";
import { reenqueueOverdue, type ShardSweepCounts, sweepShards } from "./redrive";
import { reenqueueLostDeliveries } from "./redrive-deliveries";
import { applyRetention, RETENTION_BUDGET_MS, type RetentionCounts } from "./retention";
import { expireSegments, type SegmentRetentionCounts } from "./retention-segments";
import { NO_ROUTE_GATE_COUNTS, type RouteGateCounts, tidyRouteGates } from "./route-gates";
import { NO_HANDOVER } from "./shard-epoch";
import { catchUpMissing, watchSources } from "./watch";

/**
 * One cron run of the reconciler: re-drive stuck work, apply retention, catch up with provider APIs, forget the
 * gates of routes that left the config, evaluate alerts. Each step is bounded (fixed batch sizes and page budgets), safe to run twice at once, and isolated: a
 * failing step or source is recorded and the others still run. The run's counts land in `reconcile_runs`.
 */

export interface ReconcileCounts {
  shards: ShardSweepCounts & { shardsFailed: number };
  redrive: { overdueReenqueued: number; expiredLeasesReturned: number };
  retention: RetentionCounts;
  /** The receipt partitions readied for the next period: archived to R2, then emptied whole (partition-drop.ts). */
  partitions: PartitionRingCounts;
  /** Bodies in R2 segments: copied out to outlive payload retention, and whole segments deleted (src/reconcile/retention-segments.ts). */
  segments: SegmentRetentionCounts;
  catchUp: Record<string, CatchUpCounts>;
  /** Gates of routes that left the config, forgotten (route-gates.ts). */
  routeGates: RouteGateCounts;
  /** Deliveries replayed by bulk replay jobs' steps (src/replay/replay-jobs.ts). */
  replayJobs: { replayed: number };
  alerts: { opened: number; resolved: number; notices: NotifyCounts };
  /** Operator audit log rows past OPERATOR_ACTIONS_RETENTION, deleted (operator-actions-retention.ts). */
  auditLog: { actionsForgotten: number };
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
    shards: {
      shardsVisited: 0,
      shardsTotal: 0,
      claimsRelayed: 0,
      claimsStillUnrelayed: 0,
      shardKeysExpired: 0,
      retiredShards: 0,
      retiredShardsDrained: 0,
      shardsFailed: 0,
      ...NO_HANDOVER,
    },
    redrive: { overdueReenqueued: 0, expiredLeasesReturned: 0 },
    retention: { bodiesDropped: 0, quarantineBodiesDropped: 0, keysExpired: 0, runsForgotten: 0, caughtUp: true },
    partitions: { ...NO_PARTITION_COUNTS },
    segments: { bodiesCopiedOut: 0, segmentsDeleted: 0, caughtUp: true },
    catchUp: {},
    routeGates: { ...NO_ROUTE_GATE_COUNTS },
    replayJobs: { replayed: 0 },
    alerts: { opened: 0, resolved: 0, notices: { sent: 0, logged: 0, failed: 0 } },
    auditLog: { actionsForgotten: 0 },
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
  let databaseEnvs = [{ binding: DEFAULT_DATABASE_BINDING, env }];
  const configRead = await attempt("config", null, async () => {
    sources = [...loadSources(env).values()];
    databaseEnvs = receiptDatabaseEnvs(env);
  });

  // The shard sweep goes first: it brings D1 up to date (relaying what the shards still hold) for every later step.
  await attempt("shards", null, async () => {
    counts.shards = await sweepShards(env, sources, now, { visitRetired: configRead });
  });
  // Re-drive and retention go database by database (src/sources/databases.ts): each keeps its own cursors next to
  // the receipts they page through, and a database that fails is recorded while the others still run.
  // One retention budget for the run, shared by the databases in turn.
  let retentionDeadline: number | null = null;
  // How far the consumer has come (one probe for the one queue every database's work shares): a backlog is waited
  // for, not sent again. Unknown (D1 refusing the read) means no holding back: the grace period alone decides.
  let horizon = Number.POSITIVE_INFINITY;
  await attempt("redrive.probe", null, async () => {
    horizon = redriveHorizon(await readProbeState(env), Date.now());
  });
  for (const { binding, env: databaseEnv } of databaseEnvs) {
    const where = binding === DEFAULT_DATABASE_BINDING ? null : `database:${binding}`;
    await attempt("redrive.overdue", where, async () => {
      counts.redrive.overdueReenqueued += await reenqueueOverdue(databaseEnv, now, horizon);
    });
    await attempt("redrive.leases", where, async () => {
      counts.redrive.expiredLeasesReturned += await returnExpiredLeases(databaseEnv, now);
    });
    await attempt("redrive.deliveries", where, async () => {
      counts.redrive.overdueReenqueued += await reenqueueLostDeliveries(databaseEnv, now, horizon);
    });
    // A running replay job goes on from its cursor: a crash or a redeploy since its last step loses nothing.
    await attempt("replay-jobs", where, async () => {
      counts.replayJobs.replayed += await advanceJobs(databaseEnv, now);
    });
    // Every database, named by a source or not: one a source moved away from still holds its older receipts, which
    // expire on that source's retention (applyRetention picks the sources with rows there).
    await attempt("retention", where, async () => {
      const first = retentionDeadline === null;
      retentionDeadline ??= Date.now() + RETENTION_BUDGET_MS;
      const retained = await applyRetention(databaseEnv, sources, now, Math.max(0, retentionDeadline - Date.now()));
      counts.retention = first ? retained : addRetentionCounts(counts.retention, retained);
    });
  }

  // After every database's retention, within the same budget: a day's segments go only once each database holding
  // the source's receipts has had its kept bodies copied out.
  await attempt("retention.segments", null, async () => {
    retentionDeadline ??= Date.now() + RETENTION_BUDGET_MS;
    counts.segments = await expireSegments(env, sources, now, retentionDeadline);
  });

  // After the databases' own retention, which leaves the ring's databases to this.
  await attempt("partitions", null, async () => {
    counts.partitions = await turnPartitionRing(env, sources, now);
  });

  await attempt("audit-log", null, async () => {
    counts.auditLog.actionsForgotten = await forgetOldOperatorActions(env, now);
  });

  // After the re-drive, so what it sent is ahead of the probe.
  await attempt("redrive.probe", null, () => sendProbe(env, now));

  const conditions: AlertCondition[] = [];
  for (const source of sources) {
    const settings = catchUpSettings(source);
    if (!settings) continue;
    if (!settings.ok) {
      failures.push({ step: "catch-up", source: source.name, error: settings.problems.join("; ") });
      continue;
    }
    await attempt("catch-up", source.name, async () => {
      const found = await catchUp(envForSource(env, source.name), source, settings.value, now);
      counts.catchUp[source.name] = found;
      conditions.push(catchUpMissing(source, found));
    });
  }

  // Before the alerts: a breaker alert of a route no longer configured resolves in this run's report.
  await attempt("route-gates", null, async () => {
    counts.routeGates = await tidyRouteGates(env);
  });

  // The watch's conditions, for the issues: null while unread (the config or the watch failed).
  let watched: AlertCondition[] | null = null;
  await attempt("alerts", null, async () => {
    const read = await watchSources(env, sources, now);
    conditions.push(...read);
    if (configRead) watched = read;
    const changed = await applyConditions(env, conditions, now);
    counts.alerts.opened = changed.opened;
    counts.alerts.resolved = changed.resolved;
  });
  await attempt("alerts.notify", null, async () => {
    counts.alerts.notices = await sendAlertNotices(env, now);
  });
  // Issues (docs/operating.md "Issues and notices"): after the watch, from what it read.
  await attempt("issues", null, async () => {
    if (configRead) await evaluateIssues(env, sources, watched, now);
  });

  const finishedAt = Date.now();
  await db
    .update(reconcileRuns)
    .set({
      finishedAt,
      counts: JSON.stringify(counts),
      failures: failures.length > 0 ? JSON.stringify(failures) : null,
    })
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
    durations: Object.entries(counts.durationsMs)
      .map(([step, ms]) => `${step}:${ms}`)
      .join(" "),
  });
  return { runId, counts, failures };
}

/** Two databases' retention counts as one: sums, and caught up only when both are. */
function addRetentionCounts(a: RetentionCounts, b: RetentionCounts): RetentionCounts {
  return {
    bodiesDropped: a.bodiesDropped + b.bodiesDropped,
    quarantineBodiesDropped: a.quarantineBodiesDropped + b.quarantineBodiesDropped,
    keysExpired: a.keysExpired + b.keysExpired,
    runsForgotten: a.runsForgotten + b.runsForgotten,
    caughtUp: a.caughtUp && b.caughtUp,
  };
}
