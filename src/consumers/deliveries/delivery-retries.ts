import { enqueueWork } from "../../relay/enqueue";
import { effectDeferred, type FannedOut, type FurtherDelivery } from "../commit/delivery-rows";
import type { ReceiptForWork } from "../load/load";

/**
 * After a first attempt's commit (or a held fan-out's write): each further delivery its fan-out left pending goes on
 * the queue on its own message, naming its route, with its own delay. Should the send fail, the delivery is pending
 * in D1 with a due time: the cron's re-drive finds it (src/reconcile/redrive.ts).
 */
export async function sendDeliveryRetries(
  env: Env,
  fannedOut: readonly { receipt: ReceiptForWork; fanOut: FannedOut }[],
): Promise<void> {
  const groups = new Map<string, { source: string; route: string; delaySeconds: number; receiptIds: string[] }>();
  for (const { receipt, fanOut } of fannedOut) {
    for (const delivery of fanOut.further) {
      const delaySeconds = retryDelayOf(delivery, fanOut.deferEffects ?? false);
      if (delaySeconds === null) continue;
      const key = `${receipt.source}\u0000${delivery.route}\u0000${delaySeconds}`;
      const group = groups.get(key) ?? { source: receipt.source, route: delivery.route, delaySeconds, receiptIds: [] };
      group.receiptIds.push(receipt.receiptId);
      groups.set(key, group);
    }
  }
  for (const { source, route, delaySeconds, receiptIds } of groups.values())
    await enqueueWork(env, source, receiptIds, delaySeconds, { route });
}

/**
 * The delay of a further delivery's next message, as its fan-out wrote its row (delivery-rows.ts): null when its first
 * attempt finished it; at once when it applied but its effect was left to its own delivery (a version gate, or its
 * event's commit aborted: `deferEffects`).
 */
function retryDelayOf(delivery: FurtherDelivery, deferEffects: boolean): number | null {
  const { decision } = delivery;
  if (decision.kind === "commit") return effectDeferred(delivery, deferEffects) ? 0 : null;
  return decision.queue.kind === "retry" ? decision.queue.delaySeconds : null;
}
