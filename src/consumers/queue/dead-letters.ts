import { logError } from "../../lib/log";
import { count } from "../../lib/meter";
import { databaseNamedBy, type QueuedWork, receiptIdsOf, routeNamedBy } from "../../model/work-message";
import { envForDatabase, isReceiptDatabase, receiptDatabaseEnvs } from "../../sources/databases";
import { receiptHolders } from "../../sources/receipt-homes";
import { markDeliveriesDead } from "../deliveries/deliveries";
import { markDead } from "../receipts/mark-dead";
import { groupByValue, reportUnbound, sourceName } from "./message-facts";

/**
 * The queue's dead-letter safety net: a message the queue itself gave up on. D1 keeps the receipts, marked dead
 * with their last error, so they stay visible and replayable — in whichever database holds them.
 */
export async function consumeDeadLetters(batch: MessageBatch<QueuedWork>, env: Env): Promise<void> {
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
