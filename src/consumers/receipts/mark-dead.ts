import { and, inArray } from "drizzle-orm";
import { database } from "../../db/client";
import { inJsonList } from "../../db/id-list";
import { receipts } from "../../db/schema";
import { loadSources } from "../../sources/registry";
import { forgetListenDeliveriesMarkedDead } from "../deliveries/listen-deaths";
import { ownDeliveryId } from "./route-choice";

/**
 * The dead-letter queue's verdict: the queue gave up on these receipts' message. Work still waiting or leased
 * in D1 is marked dead (payload kept, replayable); a receipt that already finished keeps its status.
 */
export async function markDead(env: Env, receiptIds: readonly string[], error: string): Promise<void> {
  if (receiptIds.length === 0) return;
  const marked = await database(env)
    .update(receipts)
    .set({ status: "dead", leaseUntil: null, nextAttemptAt: null, lastError: error })
    .where(and(inJsonList(receipts.receiptId, receiptIds), inArray(receipts.status, ["pending", "processing"])))
    .returning({ receiptId: receipts.receiptId, source: receipts.source, route: receipts.route });
  // A listen route's delivery marked dead here is no longer waiting for a listener, as one that died on its attempt.
  const sources = loadSources(env);
  await forgetListenDeliveriesMarkedDead(
    env,
    marked.map((receipt) => {
      const source = sources.get(receipt.source);
      // No route recorded on a source of several: its first attempt never ran, so no hub ever saw it.
      const route =
        receipt.route !== null
          ? source?.routes.find(({ rules }) => rules.name === receipt.route)
          : source?.routes.length === 1
            ? source.routes[0]
            : null;
      return { route, deliveryId: ownDeliveryId(receipt, source, route) };
    }),
  );
}
