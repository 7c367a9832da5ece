import { logError } from "../../lib/log";
import { listenHub } from "../../listen/client";
import type { SourceRoute } from "../../sources/config";
import type { Decision } from "../decide/decide";

/** One delivery as committed: the route it went to (if still configured), its id at the destination, its decision. */
export interface CommittedDelivery {
  route: SourceRoute | null | undefined;
  deliveryId: string;
  decision: Decision | undefined;
}

/** Pure: per `listen:<name>`, the ids of the deliveries that died. */
export function deadListenDeliveries(committed: readonly CommittedDelivery[]): Map<string, string[]> {
  const byName = new Map<string, string[]>();
  for (const { route, deliveryId, decision } of committed) {
    if (route?.destination.kind !== "listen" || decision?.kind !== "fail" || decision.receiptStatus !== "dead")
      continue;
    const name = route.destination.listenName;
    byName.set(name, [...(byName.get(name) ?? []), deliveryId]);
  }
  return byName;
}

/**
 * A listen route's delivery that died leaves its hub's waiting list (src/listen/hub.ts): one hub request per name,
 * only when one of its deliveries died. After the commit; a failure is logged, not thrown (the death is written).
 */
export async function forgetDeadListenDeliveries(env: Env, committed: readonly CommittedDelivery[]): Promise<void> {
  for (const [name, deliveryIds] of deadListenDeliveries(committed)) {
    try {
      await listenHub(env, name).forget(deliveryIds);
    } catch (error) {
      logError("listen.forget_failed", error, { listen: name, deliveries: deliveryIds.length });
    }
  }
}
