import { logError } from "../../lib/log";
import { databaseNamedBy, isRedriven, type QueuedWork, routeNamedBy } from "../../model/work-message";
import { unboundDatabaseObservation } from "../../monitor/conditions";
import { reportObservations } from "../../monitor/report";
import { DEFAULT_RETRY, retryPolicyOf } from "../../sources/config";
import { loadSources } from "../../sources/registry";
import { clampQueueDelay, type QueueVerdict } from "../decide/decide";
import { retryDelaySeconds } from "../decide/retry-schedule";

/**
 * What the consumer's three kinds of message (receipts, further deliveries, dead letters: queue.ts) share: how a
 * message's work is cut into slices, whether it was delivered before, whose it is, and how long an outage sends it
 * back for.
 */

/** Receipts processed together: a relay batch's worth (whose bodies the relay already bounded to 4 MB). */
const RECEIPTS_PER_SLICE = 50;

/**
 * A message's work, whichever row its deliveries live in: in slices of one relay batch (one D1 read and one commit
 * each, a bounded number of bodies in memory) — or, when the message's last delivery never finished, one delivery at
 * a time, each leased (so counted) before it starts: its batch-mates finish, and a crash is charged to the one that
 * was running, which is given up on once its count spends the retry budget.
 */
export async function inSlices(
  ids: readonly string[],
  redelivered: boolean,
  run: (ids: readonly string[], options: { leaseEveryAttempt?: boolean }) => Promise<Map<string, QueueVerdict>>,
): Promise<Map<string, QueueVerdict>> {
  const verdicts = new Map<string, QueueVerdict>();
  const unique = [...new Set(ids)];
  const slices = redelivered
    ? unique.map((receiptId) => [receiptId])
    : Array.from({ length: Math.ceil(unique.length / RECEIPTS_PER_SLICE) }, (_, index) =>
        unique.slice(index * RECEIPTS_PER_SLICE, (index + 1) * RECEIPTS_PER_SLICE),
      );
  for (const slice of slices)
    for (const [receiptId, verdict] of await run(slice, { leaseEveryAttempt: redelivered }))
      verdicts.set(receiptId, verdict);
  return verdicts;
}

/**
 * Delivered before and not acknowledged: the consumer died (or D1 was unreachable, the one case where this consumer
 * asks for a retry itself, which costs only the careful path once). Or sent by the cron's re-drive in place of a
 * message that was lost, which is what a consumer's death does to a local runtime's queue. A first delivery of the
 * relay's own message never gets here: the happy path takes no lease (a forward's first holds the relay's grant).
 */
export function isRedelivered(message: Message<QueuedWork>): boolean {
  return message.attempts > 1 || isRedriven(message.body);
}

export function sourceName(message: QueuedWork): string {
  return "source" in message ? message.source : "";
}

/**
 * A message's receipts no bound database holds, while the database it names is no binding of this Worker any more:
 * logged, and raised as the system alert `database-unbound` (src/monitor/conditions.ts), which stays open until the
 * binding is back. A monitor that does not answer leaves the log line as the alert.
 */
export async function reportUnbound(env: Env, event: string, message: QueuedWork, receipts: number): Promise<void> {
  const database = databaseNamedBy(message) ?? "";
  logError(event, new Error(`no bound database holds ${receipts} receipts of this message`), {
    database,
    source: sourceName(message),
    receipts,
  });
  try {
    await reportObservations(env, [unboundDatabaseObservation(database, true, receipts)], false);
  } catch (error) {
    logError("monitor.report_failed", error, { reporter: `database:${database}` });
  }
}

/** receipt id → binding, turned into binding → receipt ids. */
export function groupByValue(holders: ReadonlyMap<string, string>): Map<string, string[]> {
  const grouped = new Map<string, string[]>();
  for (const [receiptId, binding] of holders) grouped.set(binding, [...(grouped.get(binding) ?? []), receiptId]);
  return grouped;
}

export function outageDelaySeconds(env: Env, message: QueuedWork, deliveries: number): number {
  let policy = DEFAULT_RETRY;
  try {
    // The route the message names; a message of receipts is judged by its source's first route (the only one, mostly).
    policy = retryPolicyOf(loadSources(env).get(sourceName(message)), routeNamedBy(message) ?? null) ?? DEFAULT_RETRY;
  } catch {
    // An unreadable configuration is itself the outage: the default schedule applies.
  }
  return clampQueueDelay(retryDelaySeconds(policy, deliveries));
}
