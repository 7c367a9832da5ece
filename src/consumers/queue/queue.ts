import { count } from "../../lib/meter";
import { type QueuedWork, routeNamedBy } from "../../model/work-message";
import { ConnectionSlots } from "../attempt/attempt-slots";
import { CONSUMER_WALL_MS } from "../attempt/slice-budget";
import { consumeDeadLetters } from "./dead-letters";
import { consumeDeliveries } from "./delivery-messages";
import { consumeReceiptMessages } from "./receipt-messages";

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
