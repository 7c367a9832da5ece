import { logError } from "../lib/log";
import { cronObservations } from "../monitor/conditions";
import { d1Answers, reportObservations } from "../monitor/report";
import { databaseLimit } from "../monitor/store-limits";
import { DEFAULT_DATABASE_BINDING } from "../sources/config";
import { receiptDatabaseEnvs } from "../sources/databases";
import { type ReconcileReport, runReconcile } from "./reconcile";

/**
 * The cron run, watched from outside D1: a run that throws (D1 down at its first write) or records failed steps
 * raises "cron-failed" (and "d1-unreachable" when D1 does not answer), each database's size is checked against its limit, and
 * a run that reaches D1 lets the monitor copy its incidents into D1. One report per run, whatever it found.
 */
export async function watchedReconcile(env: Env, now: number): Promise<ReconcileReport | null> {
  let report: ReconcileReport | null = null;
  let thrown: unknown = null;
  try {
    report = await runReconcile(env, { now });
  } catch (error) {
    thrown = error;
    logError("reconcile.run_failed", error, {});
  }
  // Every receipt database (src/sources/databases.ts): each has its own cap, and any of them can be down.
  const databases = await Promise.all(
    receiptDatabaseEnvs(env).map(async ({ binding, env: databaseEnv }) => ({
      binding,
      ...(await d1Answers(databaseEnv)),
    })),
  );
  // Incidents are copied into DB, so DB answering is what lets the monitor write them down.
  const systemReachable =
    databases.find((database) => database.binding === DEFAULT_DATABASE_BINDING)?.reachable ?? false;
  const failedSteps =
    thrown !== null ? ["the whole run"] : [...new Set(report!.failures.map((failure) => failure.step))];
  try {
    await reportObservations(env, cronObservations({ databases, failedSteps }, databaseLimit(env)), systemReachable);
  } catch (error) {
    logError("monitor.report_failed", error, { reporter: "cron" });
  }
  return report;
}
