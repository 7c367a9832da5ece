import { logError } from "../lib/log";
import { destinationFailingConditions, destinationThresholds } from "../monitor/destination-failing";
import type { IssueCondition, IssueKind } from "../monitor/issues/types";
import { systemMonitor } from "../monitor/report";
import { flushSignatureTally } from "../monitor/signature-tally";
import type { SourceConfig } from "../sources/config";
import type { AlertCondition } from "./alerting";
import { deadLettersByRoute } from "./dead-by-route";
import { deadLetterConditions, sourceIssueConditions } from "./issue-conditions";
import { recentRecoveries } from "./recovery-issues";
import { retryingByRoute } from "./retrying-by-route";

/**
 * The cron's part in issues: what its watch read (`watched` null when the watch failed, so none of its kinds is
 * judged cleared), the dead letters per route and the deliveries per route waiting for a retry, handed to the system monitor, which adds its own alerts and
 * stores the outcome (with the signature counts it holds). A kind whose read failed is left out of `observed`: its issues stay as they are.
 */
export async function evaluateIssues(
  env: Env,
  sources: readonly SourceConfig[],
  watched: readonly AlertCondition[] | null,
  now: number,
): Promise<number> {
  const firing: IssueCondition[] = [];
  const observed: IssueKind[] = [];
  if (watched !== null) {
    firing.push(...sourceIssueConditions(watched));
    observed.push("silence", "backlog-age");
  }
  try {
    firing.push(...deadLetterConditions(await deadLettersByRoute(env, sources)));
    observed.push("dead-letters");
  } catch (error) {
    logError("issues.dead_letters_unread", error, {});
  }
  try {
    const retrying = await retryingByRoute(env, sources);
    firing.push(...destinationFailingConditions(retrying, destinationThresholds(env)));
    observed.push("destination-failing");
  } catch (error) {
    logError("issues.retrying_unread", error, {});
  }
  // A route's recovery keeps its breaker-open issue open until its job is done: the recent jobs, read here.
  const recoveries = await recentRecoveries(env).catch((error) => {
    logError("issues.recoveries_unread", error, {});
    return null;
  });
  // This isolate's signature counts go first, whatever the interval, so the evaluation sees them.
  await flushSignatureTally(env, now, true);
  return systemMonitor(env).evaluateIssues(firing, observed, now, recoveries);
}
