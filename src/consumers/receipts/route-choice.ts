import type { SourceConfig, SourceRoute } from "../../sources/config";
import { reachesOutsideD1 } from "../../sources/config";
import { ATTEMPTS_IN_FLIGHT } from "../attempt/slice-budget";
import { chooseRoute, type RouteChoice } from "../deliveries/fan-out";
import { abandonedLeaseOf, type DeliveryToAdmit } from "../gate/delivery-gate";
import type { ReceiptForWork } from "../load/load";

/** Which route(s) a receipt's attempt runs, and the deliveries that makes of it: what its gates are asked about. */

/** The delivery a receipt row carries, as its route's gate is asked about it; none when no route runs. */
export function ownDelivery(
  receipt: ReceiptForWork,
  config: SourceConfig | undefined,
  choice: RouteChoice | null,
): DeliveryToAdmit[] {
  const route = choice?.kind === "recorded" ? choice.route : choice?.kind === "fan-out" ? choice.fanOut.primary : null;
  if (!route) return [];
  return [
    {
      receiptId: receipt.receiptId,
      source: receipt.source,
      config,
      route: route.rules.name,
      row: "receipt",
      ...abandonedLeaseOf(receipt),
    },
  ];
}

/**
 * A first attempt's further deliveries (its fan-out's other matched routes), which have no row yet, split by the
 * connections one attempt may open at once (ATTEMPTS_IN_FLIGHT, its own route's included): `withAttempt`, asked at
 * their gates and sent with the attempt; `onTheirOwn`, past that budget, not attempted now but written pending, due
 * at once, each on a message of its own (as one its gate held is), so a 16-route fan-out never waits for connections.
 */
export function furtherDeliveries(
  receipt: ReceiptForWork,
  config: SourceConfig | undefined,
  choice: RouteChoice | null,
): { withAttempt: DeliveryToAdmit[]; onTheirOwn: DeliveryToAdmit[] } {
  if (choice?.kind !== "fan-out") return { withAttempt: [], onTheirOwn: [] };
  const deliveries = choice.fanOut.further.map((route) => ({
    receiptId: receipt.receiptId,
    source: receipt.source,
    config,
    route: route.rules.name,
    row: "none" as const,
  }));
  const budget = ATTEMPTS_IN_FLIGHT - (choice.fanOut.primary ? 1 : 0);
  return { withAttempt: deliveries.slice(0, budget), onTheirOwn: deliveries.slice(budget) };
}

/**
 * The connections a receipt's attempt opens at once: one for its own route, and on a first attempt that fans out
 * one more for each further delivery its gate let go (`held`: the routes not attempted now). Its attempt holds as
 * many of the invocation's slots (attempt-slots.ts).
 */
export function attemptConnections(choice: RouteChoice | null, held: ReadonlyMap<string, number> | undefined): number {
  if (choice?.kind !== "fan-out") return 1;
  const sent = choice.fanOut.further.filter(({ rules }) => !held?.has(rules.name)).length;
  return (choice.fanOut.primary ? 1 : 0) + sent;
}

export function routeChoice(source: SourceConfig | undefined, receipt: ReceiptForWork): RouteChoice | null {
  if (!source) return null;
  const event = receipt.body
    ? {
        body: receipt.body,
        keptHeaders: receipt.keptHeaders,
        eventType: receipt.eventType,
        subjectId: receipt.subjectId,
      }
    : null;
  return chooseRoute(source, receipt, event, receipt.committedAt !== null);
}

/** Whether the route(s) an attempt runs may act outside D1 (a forward): only those take a lease up front. */
export function reachesOutside(choice: RouteChoice | null): boolean {
  if (choice === null || choice.kind === "gone") return false;
  if (choice.kind === "recorded") return reachesOutsideD1(choice.route.destination);
  return [choice.fanOut.primary, ...choice.fanOut.further].some((route) => reachesOutsideD1(route?.destination));
}

/** The id a receipt's own delivery goes by at its destination: with its route's name when its source has several. */
export function ownDeliveryId(
  receipt: { receiptId: string },
  source: SourceConfig | undefined,
  route: SourceRoute | null | undefined,
): string {
  return (source?.routes.length ?? 1) > 1 && route ? `${receipt.receiptId}:${route.rules.name}` : receipt.receiptId;
}
