import { logError } from "../../lib/log";
import { count } from "../../lib/meter";
import {
  carriesRelayGrant,
  databaseNamedBy,
  isRedriven,
  probeTimeOf,
  type QueuedWork,
  receiptIdsOf,
  routeNamedBy,
} from "../../model/work-message";
import { unboundDatabaseObservation } from "../../monitor/conditions";
import { reportObservations } from "../../monitor/report";
import { enqueueReceipts, enqueueWork } from "../../relay/enqueue";
import { DEFAULT_RETRY, retryPolicyOf } from "../../sources/config";
import { databaseBindingOf, envForDatabase, isReceiptDatabase, receiptDatabaseEnvs } from "../../sources/databases";
import { receiptHolders } from "../../sources/receipt-homes";
import { loadSources } from "../../sources/registry";
import { clampQueueDelay, type QueueVerdict } from "../decide/decide";
import { markDeliveriesDead } from "../deliveries/deliveries";
import type { WokenHere } from "../gate/delivery-gate";
import { recordProbesHandled } from "./queue-probe";

/** Receipts processed together: a relay batch's worth (whose bodies the relay already bounded to 4 MB). */
const RECEIPTS_PER_SLICE = 50;

import { ConnectionSlots } from "../attempt/attempt-slots";
import { CONSUMER_WALL_MS } from "../attempt/slice-budget";
import { retryDelaySeconds } from "../decide/retry-schedule";
import { followWoken, processDeliveriesWithFollowOns } from "../receipts/follow-on";
import { markDead } from "../receipts/mark-dead";
import { processBatch } from "../receipts/process";

/**
 * The queue consumer. A whole batch of messages (each naming a relay batch of receipts) is processed together:
 * one D1 read and one D1 commit for all of it. Each receipt then goes its own way: done, or back on the queue
 * with its own delay in a new message, so one failing event never holds back the rest of its batch.
 */
export async function consumeWork(batch: MessageBatch<QueuedWork>, env: Env, _ctx?: ExecutionContext): Promise<void> {
  count("queueOperations", batch.messages.length); // each delivery of a message is a billed read
  if (batch.queue.endsWith("-dead")) return consumeDeadLetters(batch, env);
  const invocationEndsBy = Date.now() + CONSUMER_WALL_MS;
  // Further deliveries (a message naming a route) go their own way, each message on its own: never with receipts, but
  // alongside them, so the waits of one (a rate limit's turns) and the run of the other (an in-flight cap's
  // follow-ons) share the invocation's time instead of adding up, and neither holds back the queue's next batch. They
  // share its outgoing connections too: six at once in all (attempt-slots.ts), not six each.
  const connections = new ConnectionSlots();
  const furtherDeliveries = (async () => {
    for (const message of batch.messages)
      if (routeNamedBy(message.body) !== undefined)
        await consumeDeliveries(env, message, invocationEndsBy, connections);
  })();
  try {
    await consumeReceiptMessages(
      env,
      batch.messages.filter((message) => routeNamedBy(message.body) === undefined),
      invocationEndsBy,
      connections,
    );
  } finally {
    await furtherDeliveries;
  }
}

/** The messages of receipts in a batch (each receipt's own delivery, and its fan-out on its first attempt). */
async function consumeReceiptMessages(
  env: Env,
  messages: readonly Message<QueuedWork>[],
  invocationEndsBy: number,
  connections: ConnectionSlots,
): Promise<void> {
  if (messages.length === 0) return;
  const receiptIds = messages.flatMap((message) => receiptIdsOf(message.body));
  const verdicts = new Map<string, QueueVerdict>();
  /** Where each receipt was processed: its retry names that database. */
  const processedIn = new Map<string, string>();
  // The relay's own messages, first delivered, grant their receipts' first leases (relay-grant.ts); a receipt some
  // other message of the batch names too is run ungranted.
  const relayGranted = relayGrantedIds(messages);
  // Deliveries a release woke, per database: run once the batch's own verdicts are sent (below), so a long run of
  // follow-ons never holds back the batch's other retries (a rate-limited route's next turn).
  const wokenHere = new Map<string, WokenHere[]>();
  // In slices, or one at a time for a redelivered (or re-driven) message (inSlices, below).
  const processIn = async (binding: string, idsInDatabase: readonly string[], redelivered = false) => {
    const databaseEnv = envForDatabase(env, binding);
    const woken = wokenHere.get(binding) ?? [];
    wokenHere.set(binding, woken);
    const sliced = await inSlices(idsInDatabase, redelivered, (ids, options) =>
      processBatch(databaseEnv, ids, Date.now(), invocationEndsBy, {
        ...options,
        relayGranted,
        wokenHere: woken,
        connections,
      }),
    );
    for (const [receiptId, verdict] of sliced) {
      verdicts.set(receiptId, verdict);
      processedIn.set(receiptId, binding);
    }
  };
  try {
    // Per database: the one each message names (each message is one source's, its receipts in one database).
    const unbound: string[] = [];
    for (const redelivered of [false, true]) {
      for (const [binding, idsInDatabase] of receiptIdsByDatabase(
        env,
        messages.filter((message) => isRedelivered(message) === redelivered),
      )) {
        if (isReceiptDatabase(env, binding)) await processIn(binding, idsInDatabase, redelivered);
        else unbound.push(...idsInDatabase);
      }
    }
    // Not where its message said: a message older than its source's move (it names no database, so it was read in
    // the source's database of today), one naming a database a later deploy unbound, or a receipt retention
    // removed. Each is looked for in every database before it counts as missing; the happy path never gets here.
    const elsewhere = [
      ...unbound,
      ...[...verdicts].flatMap(([receiptId, verdict]) => (isMissing(verdict) ? [receiptId] : [])),
    ];
    if (elsewhere.length > 0) {
      for (const [binding, idsInDatabase] of groupByValue(await receiptHolders(receiptDatabaseEnvs(env), elsewhere)))
        await processIn(binding, idsInDatabase);
    }
  } catch (error) {
    // D1 unreachable or similar: every receipt is still pending or leased in D1; come back later, on each
    // message's own source's schedule.
    logError("consume.failed", error, { receipts: receiptIds.length });
    for (const message of messages)
      message.retry({ delaySeconds: outageDelaySeconds(env, message.body, message.attempts) });
    return;
  }
  const sourceOf = new Map(
    messages.flatMap((message) =>
      receiptIdsOf(message.body).map((receiptId) => [receiptId, sourceName(message.body)] as const),
    ),
  );
  const later = new Map<
    string,
    { delaySeconds: number; binding: string; receipts: { source: string; receiptId: string }[] }
  >();
  for (const [receiptId, verdict] of verdicts) {
    if (verdict.kind !== "retry") continue;
    const binding = processedIn.get(receiptId)!;
    const key = `${verdict.delaySeconds}:${binding}`;
    const group = later.get(key) ?? { delaySeconds: verdict.delaySeconds, binding, receipts: [] };
    group.receipts.push({ source: sourceOf.get(receiptId) ?? "", receiptId });
    later.set(key, group);
  }
  try {
    // Retries go out before the originals are acknowledged: a crash in between repeats work, never loses it.
    for (const { delaySeconds, binding, receipts } of later.values())
      await enqueueReceipts(envForDatabase(env, binding), receipts, delaySeconds);
  } catch (error) {
    logError("consume.requeue_failed", error, { receipts: receiptIds.length });
    for (const message of messages)
      message.retry({ delaySeconds: outageDelaySeconds(env, message.body, message.attempts) });
    return;
  }
  try {
    // After the batch's work: a probe says the consumer has come this far (queue-probe.ts).
    await recordProbesHandled(
      env,
      messages.flatMap((message) => probeTimeOf(message.body) ?? []),
    );
  } catch (error) {
    logError("consume.probe_failed", error);
  }
  for (const message of messages) {
    const nowhere = receiptIdsOf(message.body).filter((receiptId) => !verdicts.has(receiptId));
    if (nowhere.length > 0) {
      // Named for a database this Worker no longer binds, and in none it has: never acked as done. It comes back
      // until the binding does (or the queue gives up and its dead-letter consumer says so again).
      await reportUnbound(env, "consume.database_unbound", message.body, nowhere.length);
      message.retry({ delaySeconds: outageDelaySeconds(env, message.body, message.attempts) });
      continue;
    }
    message.ack();
    count("queueOperations");
  }
  // The batch's own work is settled: now the deliveries its releases woke, in this invocation (follow-on.ts). One
  // that fails here loses nothing: its slot expires and its hold's message brings it back (SLOT_WAIT_FALLBACK_MS).
  for (const [binding, woken] of wokenHere)
    if (woken.length > 0)
      await followWoken(envForDatabase(env, binding), woken, invocationEndsBy, { connections }).catch((error) =>
        logError("consume.follow_on_failed", error, { database: binding }),
      );
}

/**
 * One message of further deliveries to one route: processed, its retries sent as messages of their own (naming the
 * route), then acknowledged. D1 unreachable: the message comes back on its source's schedule.
 */
async function consumeDeliveries(
  env: Env,
  message: Message<QueuedWork>,
  invocationEndsBy: number,
  connections: ConnectionSlots,
): Promise<void> {
  const route = routeNamedBy(message.body)!;
  const binding = databaseNamedBy(message.body) ?? databaseBindingOf(env, sourceName(message.body));
  try {
    const databaseEnv = envForDatabase(env, binding);
    const verdicts = await inSlices(receiptIdsOf(message.body), isRedelivered(message), (ids, options) =>
      processDeliveriesWithFollowOns(databaseEnv, route, ids, invocationEndsBy, { ...options, connections }),
    );
    const later = new Map<number, string[]>();
    for (const [receiptId, verdict] of verdicts)
      if (verdict.kind === "retry")
        later.set(verdict.delaySeconds, [...(later.get(verdict.delaySeconds) ?? []), receiptId]);
    for (const [delaySeconds, receiptIds] of later)
      await enqueueWork(databaseEnv, sourceName(message.body), receiptIds, delaySeconds, { route });
  } catch (error) {
    logError("consume.deliveries_failed", error, { route, receipts: receiptIdsOf(message.body).length });
    message.retry({ delaySeconds: outageDelaySeconds(env, message.body, message.attempts) });
    return;
  }
  message.ack();
  count("queueOperations");
}

/**
 * A message's work, whichever row its deliveries live in: in slices of one relay batch (one D1 read and one commit
 * each, a bounded number of bodies in memory) — or, when the message's last delivery never finished, one delivery at
 * a time, each leased (so counted) before it starts: its batch-mates finish, and a crash is charged to the one that
 * was running, which is given up on once its count spends the retry budget.
 */
async function inSlices(
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
function isRedelivered(message: Message<QueuedWork>): boolean {
  return message.attempts > 1 || isRedriven(message.body);
}

/** The receipts a first delivery of the relay's own message names, and no other message of the batch. */
function relayGrantedIds(messages: readonly Message<QueuedWork>[]): ReadonlySet<string> {
  const granted = (message: Message<QueuedWork>) => !isRedelivered(message) && carriesRelayGrant(message.body);
  const elsewhere = new Set(messages.filter((message) => !granted(message)).flatMap((m) => receiptIdsOf(m.body)));
  return new Set(
    messages
      .filter(granted)
      .flatMap((message) => receiptIdsOf(message.body))
      .filter((receiptId) => !elsewhere.has(receiptId)),
  );
}

function sourceName(message: QueuedWork): string {
  return "source" in message ? message.source : "";
}

function isMissing(verdict: QueueVerdict): boolean {
  return verdict.kind === "done" && verdict.status === "missing";
}

/**
 * The batch's receipt ids grouped by the database their message names; an older message, which names none, by its
 * source's database today (`DB` without a source).
 */
function receiptIdsByDatabase(env: Env, messages: readonly Message<QueuedWork>[]): Map<string, string[]> {
  const byDatabase = new Map<string, string[]>();
  for (const message of messages) {
    const binding = databaseNamedBy(message.body) ?? databaseBindingOf(env, sourceName(message.body));
    byDatabase.set(binding, [...(byDatabase.get(binding) ?? []), ...receiptIdsOf(message.body)]);
  }
  return byDatabase;
}

/**
 * A message's receipts no bound database holds, while the database it names is no binding of this Worker any more:
 * logged, and raised as the system alert `database-unbound` (src/monitor/conditions.ts), which stays open until the
 * binding is back. A monitor that does not answer leaves the log line as the alert.
 */
async function reportUnbound(env: Env, event: string, message: QueuedWork, receipts: number): Promise<void> {
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
function groupByValue(holders: ReadonlyMap<string, string>): Map<string, string[]> {
  const grouped = new Map<string, string[]>();
  for (const [receiptId, binding] of holders) grouped.set(binding, [...(grouped.get(binding) ?? []), receiptId]);
  return grouped;
}

function outageDelaySeconds(env: Env, message: QueuedWork, deliveries: number): number {
  let policy = DEFAULT_RETRY;
  try {
    // The route the message names; a message of receipts is judged by its source's first route (the only one, mostly).
    policy = retryPolicyOf(loadSources(env).get(sourceName(message)), routeNamedBy(message) ?? null) ?? DEFAULT_RETRY;
  } catch {
    // An unreadable configuration is itself the outage: the default schedule applies.
  }
  return clampQueueDelay(retryDelaySeconds(policy, deliveries));
}

/**
 * The queue's dead-letter safety net: a message the queue itself gave up on. D1 keeps the receipts, marked dead
 * with their last error, so they stay visible and replayable — in whichever database holds them.
 */
async function consumeDeadLetters(batch: MessageBatch<QueuedWork>, env: Env): Promise<void> {
  const databases = receiptDatabaseEnvs(env);
  for (const message of batch.messages) {
    const receiptIds = receiptIdsOf(message.body);
    try {
      // With one database there is nowhere else to look: mark there, as before.
      const holders =
        databases.length === 1
          ? new Map(receiptIds.map((receiptId) => [receiptId, databases[0]!.binding]))
          : await receiptHolders(databases, receiptIds);
      const error = `work queue gave up after ${message.attempts} deliveries`;
      const route = routeNamedBy(message.body);
      for (const [binding, idsInDatabase] of groupByValue(holders)) {
        // A message of further deliveries gave up on those deliveries alone; the receipts' own routes are untouched.
        if (route === undefined) await markDead(envForDatabase(env, binding), idsInDatabase, error);
        else
          await markDeliveriesDead(envForDatabase(env, binding), sourceName(message.body), route, idsInDatabase, error);
      }
      const nowhere = new Set(receiptIds).size - holders.size;
      const named = databaseNamedBy(message.body);
      if (nowhere > 0 && named !== undefined && !isReceiptDatabase(env, named))
        await reportUnbound(env, "dead_letter.database_unbound", message.body, nowhere);
      message.ack();
      count("queueOperations");
    } catch (error) {
      logError("dead_letter.failed", error, { receipts: receiptIds.length });
      message.retry();
    }
  }
}
