import { logError } from "../../lib/log";
import { listenHub } from "../../listen/client";
import type { SourceConfig, SourceRoute } from "../../sources/config";
import type { Decision } from "../decide/decide";

/** One delivery that died: the route it went to (if still configured) and its id at the destination. */
export interface DeadDelivery {
  route: SourceRoute | null | undefined;
  deliveryId: string;
}

/** One delivery as committed: a dead one when its decision says so. */
export interface CommittedDelivery extends DeadDelivery {
  decision: Decision | undefined;
}

/** Pure: per `listen:<name>`, the ids of the deliveries that died. */
export function deadListenDeliveries(committed: readonly CommittedDelivery[]): Map<string, string[]> {
  return listenDeathsByName(
    committed.filter(({ decision }) => decision?.kind === "fail" && decision.receiptStatus === "dead"),
  );
}

/** Pure: per `listen:<name>`, the ids of these dead deliveries that went to one. */
function listenDeathsByName(dead: readonly DeadDelivery[]): Map<string, string[]> {
  const byName = new Map<string, string[]>();
  for (const { route, deliveryId } of dead) {
    if (route?.destination.kind !== "listen") continue;
    const name = route.destination.listenName;
    byName.set(name, [...(byName.get(name) ?? []), deliveryId]);
  }
  return byName;
}

/**
 * Pure: a first attempt's further deliveries as committed (its fan-out as written), each named as its attempt named
 * it to the destination (`<receipt>:<route>`, src/consumers/attempt/run-destination.ts).
 */
export function furtherDeliveriesCommitted(
  sources: ReadonlyMap<string, SourceConfig>,
  fannedOut: readonly {
    receipt: { receiptId: string; source: string };
    fanOut: { further: readonly { route: string; decision: Decision }[] };
  }[],
): CommittedDelivery[] {
  return fannedOut.flatMap(({ receipt, fanOut }) =>
    fanOut.further.map(({ route, decision }) => ({
      route: sources.get(receipt.source)?.routes.find(({ rules }) => rules.name === route),
      deliveryId: `${receipt.receiptId}:${route}`,
      decision,
    })),
  );
}

/**
 * A listen route's delivery that died leaves its hub's waiting list (src/listen/hub.ts): one hub request per name,
 * only when one of its deliveries died. After the commit; a failure is logged, not thrown (the death is written).
 */
export async function forgetDeadListenDeliveries(env: Env, committed: readonly CommittedDelivery[]): Promise<void> {
  await forgetListenDeaths(env, deadListenDeliveries(committed));
}

/** The same for deliveries already known dead: those the dead-letter queue marked (src/consumers/queue/dead-letters.ts). */
export async function forgetListenDeliveriesMarkedDead(env: Env, dead: readonly DeadDelivery[]): Promise<void> {
  await forgetListenDeaths(env, listenDeathsByName(dead));
}

async function forgetListenDeaths(env: Env, byName: ReadonlyMap<string, string[]>): Promise<void> {
  for (const [name, deliveryIds] of byName) {
    try {
      await listenHub(env, name).forget(deliveryIds);
    } catch (error) {
      logError("listen.forget_failed", error, { listen: name, deliveries: deliveryIds.length });
    }
  }
}
