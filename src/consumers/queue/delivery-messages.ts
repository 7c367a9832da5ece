import { logError } from "../../lib/log";
import { count } from "../../lib/meter";
import { databaseNamedBy, type QueuedWork, receiptIdsOf, routeNamedBy } from "../../model/work-message";
import { enqueueWork } from "../../relay/enqueue";
import { databaseBindingOf, envForDatabase } from "../../sources/databases";
import type { ConnectionSlots } from "../attempt/attempt-slots";
import { retriesByDelay } from "../decide/decide";
import { processDeliveriesWithFollowOns } from "../receipts/follow-on";
import { inSlices, isRedelivered, outageDelaySeconds, sourceName } from "./message-facts";

/**
 * One message of further deliveries to one route: processed, its retries sent as messages of their own (naming the
 * route), then acknowledged. D1 unreachable: the message comes back on its source's schedule.
 */
export async function consumeDeliveries(
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
    for (const [delaySeconds, receiptIds] of retriesByDelay(verdicts))
      await enqueueWork(databaseEnv, sourceName(message.body), receiptIds, delaySeconds, { route });
  } catch (error) {
    logError("consume.deliveries_failed", error, { route, receipts: receiptIdsOf(message.body).length });
    message.retry({ delaySeconds: outageDelaySeconds(env, message.body, message.attempts) });
    return;
  }
  message.ack();
  count("queueOperations");
}
