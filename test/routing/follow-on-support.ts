import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import worker from "../../src/index";
import { type QueuedWork, receiptIdsOf } from "../../src/model/work-message";
import { seedReceipt } from "../consumers/support/processing";

/**
 * The follow-on tests' fixture (issue 37 §4, src/consumers/receipts/follow-on.ts): a backlog of events to a
 * max_in_flight route, handed to the real queue entry point as the relay's message, with a work queue that records
 * what the consumer sends (and its delay) and delivers nothing, so no other consumer races the test.
 */

/** `n` events of `source`, seeded as the relay leaves them (pending, not enqueued): their receipt ids, oldest first. */
export async function backlog(source: string, n: number): Promise<string[]> {
  const receiptIds: string[] = [];
  for (let index = 0; index < n; index += 1)
    receiptIds.push(await seedReceipt({ source, payload: { type: "account.credited", data: { amount: index } } }));
  return receiptIds;
}

/** A message the consumer sent, with the delay it was sent with. */
export interface SentWork {
  body: QueuedWork;
  delaySeconds: number;
}

/** The receipt ids the consumer sent back due at once (a woken delivery it did not run), in sent order. */
export const sentDueNow = (sent: readonly SentWork[]) =>
  sent.filter((message) => message.delaySeconds === 0).flatMap((message) => receiptIdsOf(message.body));

/** A work queue that records each message sent, with its delay, and delivers nothing. */
export function recordingQueue(sent: SentWork[]): Queue {
  return {
    send: async (body: QueuedWork, options?: QueueSendOptions) =>
      void sent.push({ body, delaySeconds: options?.delaySeconds ?? 0 }),
    sendBatch: async (messages: Iterable<MessageSendRequest<QueuedWork>>, options?: QueueSendBatchOptions) => {
      for (const message of messages)
        sent.push({ body: message.body, delaySeconds: message.delaySeconds ?? options?.delaySeconds ?? 0 });
    },
  } as unknown as Queue;
}

let delivered = 0;

/**
 * One consumer invocation through the real queue handler (src/index.ts → consumeWork): a batch of one message naming
 * `receiptIds`, as the relay sends it (first delivery, its leases granted); or, naming `route`, a message of further
 * deliveries to that route, as a fan-out or a retry sends it. Returns the queue's view of the batch
 * (acks, retries) and the messages the consumer sent.
 */
export async function consumeOnce(source: string, receiptIds: readonly string[], route?: string) {
  const body: QueuedWork =
    route === undefined
      ? { source, database: "DB", receiptIds: [...receiptIds], relayGrant: true }
      : { source, database: "DB", receiptIds: [...receiptIds], route };
  const id = `msg_follow_${++delivered}_${receiptIds[0]}`;
  const batch = createMessageBatch<QueuedWork>("webhook-work", [{ id, timestamp: new Date(), attempts: 1, body }]);
  const ctx = createExecutionContext();
  const sent: SentWork[] = [];
  await worker.queue(batch, { ...env, WORK_QUEUE: recordingQueue(sent) }, ctx);
  return { id, result: await getQueueResult(batch, ctx), sent };
}
