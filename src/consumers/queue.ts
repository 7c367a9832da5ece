import { count } from "../lib/meter";
import { logError } from "../lib/log";
import { receiptIdsOf, type QueuedWork } from "../model/work-message";
import { enqueueReceipts } from "../relay/enqueue";
import { DEFAULT_RETRY } from "../sources/config";
import { databaseBindingOf, envForDatabase, envForSource } from "../sources/databases";
import { loadSources } from "../sources/registry";
import { clampQueueDelay, type QueueVerdict } from "./decide";

/** Receipts processed together: a relay batch's worth (whose bodies the relay already bounded to 4 MB). */
const RECEIPTS_PER_SLICE = 50;
import { markDead, processBatch } from "./process";
import { retryDelaySeconds } from "./retry-schedule";
import { CONSUMER_WALL_MS } from "./slice-budget";

/**
 * The queue consumer. A whole batch of messages (each naming a relay batch of receipts) is processed together:
 * one D1 read and one D1 commit for all of it. Each receipt then goes its own way: done, or back on the queue
 * with its own delay in a new message, so one failing event never holds back the rest of its batch.
 */
export async function consumeWork(batch: MessageBatch<QueuedWork>, env: Env, _ctx?: ExecutionContext): Promise<void> {
  count("queueOperations", batch.messages.length); // each delivery of a message is a billed read
  if (batch.queue.endsWith("-dead")) return consumeDeadLetters(batch, env);
  const receiptIds = batch.messages.flatMap((message) => receiptIdsOf(message.body));
  const verdicts = new Map<string, QueueVerdict>();
  const invocationEndsBy = Date.now() + CONSUMER_WALL_MS;
  try {
    // Per database (each message is one source's, and a source's receipts live in one database), in slices of
    // one relay batch: one D1 read and one commit each, and a bounded number of bodies in memory.
    for (const [binding, idsInDatabase] of receiptIdsByDatabase(env, batch.messages)) {
      const databaseEnv = envForDatabase(env, binding);
      for (let start = 0; start < idsInDatabase.length; start += RECEIPTS_PER_SLICE) {
        for (const [receiptId, verdict] of await processBatch(databaseEnv, idsInDatabase.slice(start, start + RECEIPTS_PER_SLICE), Date.now(), invocationEndsBy)) {
          verdicts.set(receiptId, verdict);
        }
      }
    }
  } catch (error) {
    // D1 unreachable or similar: every receipt is still pending or leased in D1; come back later, on each
    // message's own source's schedule.
    logError("consume.failed", error, { receipts: receiptIds.length });
    for (const message of batch.messages) message.retry({ delaySeconds: outageDelaySeconds(env, message.body, message.attempts) });
    return;
  }
  const sourceOf = new Map(batch.messages.flatMap((message) => receiptIdsOf(message.body).map((receiptId) => [receiptId, sourceName(message.body)] as const)));
  const later = new Map<number, { source: string; receiptId: string }[]>();
  for (const [receiptId, verdict] of verdicts) {
    if (verdict.kind !== "retry") continue;
    const list = later.get(verdict.delaySeconds) ?? [];
    list.push({ source: sourceOf.get(receiptId) ?? "", receiptId });
    later.set(verdict.delaySeconds, list);
  }
  try {
    // Retries go out before the originals are acknowledged: a crash in between repeats work, never loses it.
    for (const [delaySeconds, receipts] of later) await enqueueReceipts(env, receipts, delaySeconds);
  } catch (error) {
    logError("consume.requeue_failed", error, { receipts: receiptIds.length });
    for (const message of batch.messages) message.retry({ delaySeconds: outageDelaySeconds(env, message.body, message.attempts) });
    return;
  }
  for (const message of batch.messages) {
    message.ack();
    count("queueOperations");
  }
}

function sourceName(message: QueuedWork): string {
  return "source" in message ? message.source : "";
}

/** The batch's receipt ids grouped by the database their source names; a message without a source is `DB`'s. */
function receiptIdsByDatabase(env: Env, messages: readonly Message<QueuedWork>[]): Map<string, string[]> {
  const byDatabase = new Map<string, string[]>();
  for (const message of messages) {
    const binding = databaseBindingOf(env, sourceName(message.body));
    byDatabase.set(binding, [...(byDatabase.get(binding) ?? []), ...receiptIdsOf(message.body)]);
  }
  return byDatabase;
}

function outageDelaySeconds(env: Env, message: QueuedWork, deliveries: number): number {
  let policy = DEFAULT_RETRY;
  try {
    policy = loadSources(env).get(sourceName(message))?.retry ?? DEFAULT_RETRY;
  } catch {
    // An unreadable configuration is itself the outage: the default schedule applies.
  }
  return clampQueueDelay(retryDelaySeconds(policy, deliveries));
}

/**
 * The queue's dead-letter safety net: a message the queue itself gave up on. D1 keeps the receipts, marked dead
 * with their last error, so they stay visible and replayable.
 */
async function consumeDeadLetters(batch: MessageBatch<QueuedWork>, env: Env): Promise<void> {
  for (const message of batch.messages) {
    try {
      await markDead(envForSource(env, sourceName(message.body)), receiptIdsOf(message.body), `work queue gave up after ${message.attempts} deliveries`);
      message.ack();
      count("queueOperations");
    } catch (error) {
      logError("dead_letter.failed", error, { receipts: receiptIdsOf(message.body).length });
      message.retry();
    }
  }
}
