import { logError } from "../../lib/log";
import { count } from "../../lib/meter";
import {
  carriesRelayGrant,
  databaseNamedBy,
  probeTimeOf,
  type QueuedWork,
  receiptIdsOf,
} from "../../model/work-message";
import { enqueueReceipts } from "../../relay/enqueue";
import { databaseBindingOf, envForDatabase, isReceiptDatabase, receiptDatabaseEnvs } from "../../sources/databases";
import { receiptHolders } from "../../sources/receipt-homes";
import type { ConnectionSlots } from "../attempt/attempt-slots";
import { type QueueVerdict, retriesByDelay } from "../decide/decide";
import type { WokenHere } from "../gate/delivery-release";
import { followWoken } from "../receipts/follow-on";
import { processBatch } from "../receipts/process";
import { groupByValue, inSlices, isRedelivered, outageDelaySeconds, reportUnbound, sourceName } from "./message-facts";
import { recordProbesHandled } from "./queue-probe";

/** The messages of receipts in a batch (each receipt's own delivery, and its fan-out on its first attempt). */
export async function consumeReceiptMessages(
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
  // Each retry names the database its receipt was processed in (every receipt processed has its verdict).
  const retries = [...groupByValue(processedIn)].map(([binding, idsInDatabase]) => ({
    binding,
    byDelay: retriesByDelay(idsInDatabase.map((receiptId) => [receiptId, verdicts.get(receiptId)!] as const)),
  }));
  try {
    // Retries go out before the originals are acknowledged: a crash in between repeats work, never loses it.
    for (const { binding, byDelay } of retries)
      for (const [delaySeconds, ids] of byDelay) {
        const receipts = ids.map((receiptId) => ({ source: sourceOf.get(receiptId) ?? "", receiptId }));
        await enqueueReceipts(envForDatabase(env, binding), receipts, delaySeconds);
      }
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
