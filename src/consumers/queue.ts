import { logError } from "../lib/log";
import type { WorkMessage } from "../relay/messages";
import { markDead, processReceipt } from "./process";
import { QUEUE_MAX_DELAY_SECONDS, retryDelaySeconds } from "./retry-schedule";
import { DEFAULT_RETRY } from "../sources/config";

/**
 * The queue consumer. Each message is handled on its own — acked, or retried with its own delay — so one
 * poison event never holds back the rest of its batch.
 */
export async function consumeWork(batch: MessageBatch<WorkMessage>, env: Env, _ctx?: ExecutionContext): Promise<void> {
  if (batch.queue.endsWith("-dead")) return consumeDeadLetters(batch, env);
  await Promise.all(
    batch.messages.map(async (message) => {
      try {
        const outcome = await processReceipt(env, message.body.receiptId);
        if (outcome.kind === "retry") message.retry({ delaySeconds: outcome.delaySeconds });
        else message.ack();
      } catch (error) {
        // D1 unreachable or similar: the receipt is still pending or leased in D1; come back later.
        logError("consume.failed", error, { receipt: message.body.receiptId, queueAttempt: message.attempts });
        message.retry({ delaySeconds: Math.min(QUEUE_MAX_DELAY_SECONDS, retryDelaySeconds(DEFAULT_RETRY, message.attempts)) });
      }
    }),
  );
}

/**
 * The queue's dead-letter safety net: a message the queue itself gave up on. D1 keeps the receipt, marked dead
 * with its last error, so it stays visible and replayable.
 */
async function consumeDeadLetters(batch: MessageBatch<WorkMessage>, env: Env): Promise<void> {
  for (const message of batch.messages) {
    try {
      await markDead(env, message.body.receiptId, `work queue gave up after ${message.attempts} deliveries`);
      message.ack();
    } catch (error) {
      logError("dead_letter.failed", error, { receipt: message.body.receiptId });
      message.retry();
    }
  }
}
