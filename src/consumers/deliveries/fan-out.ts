import { filterSubject, type RoutedEvent } from "../../routing/route";
import type { SourceConfig, SourceRoute } from "../../sources/config";
import { type FannedOut, notAttempted } from "../commit/delivery-rows";

/**
 * Which route an attempt runs, as a pure function of the source's routes and what the receipt has recorded
 * (docs/processing.md, "Deliveries"). The receipt row carries one route's delivery: for a one-route source its only
 * route, as always; for a source with several, the first route whose filter matches, chosen on the event's first
 * consumption, when every further matched route gets a delivery of its own (a `deliveries` row, written with that
 * attempt's commit, or on its own when the chosen route's gate holds the event: `heldFanOut`) and every filtered-out
 * route is only named on the receipt.
 */

export interface FanOut {
  /** The route the receipt row carries; null when every route's filter turned the event away. */
  primary: SourceRoute | null;
  /** Every other route that matched: one delivery each. */
  further: SourceRoute[];
  /** Routes whose filter did not match: no delivery, no row. */
  filtered: string[];
}

/** What the receipt row says about its routes (migrations/0014). */
export interface RecordedRoute {
  route: string | null;
  filteredRoutes: string | null;
}

export type RouteChoice =
  /** The receipt's own route, already chosen (or the only one). */
  | { kind: "recorded"; route: SourceRoute }
  /** First attempt of a source with several routes: choose and fan out now. */
  | { kind: "fan-out"; fanOut: FanOut }
  /** The route this receipt was given is no longer configured. */
  | { kind: "gone"; name: string };

export function chooseRoute(
  source: SourceConfig,
  recorded: RecordedRoute,
  event: RoutedEvent | null,
  committed: boolean,
): RouteChoice {
  if (recorded.route !== null) {
    const route = source.routes.find(({ rules }) => rules.name === recorded.route);
    return route ? { kind: "recorded", route } : { kind: "gone", name: recorded.route };
  }
  // A one-route source, an outcome already committed, a body no longer kept, or a fan-out already done (every route
  // filtered out): the first route, as before routes were many.
  if (source.routes.length === 1 || committed || event === null || recorded.filteredRoutes !== null)
    return { kind: "recorded", route: source.routes[0]! };
  return { kind: "fan-out", fanOut: fanOut(source.routes, event) };
}

export function fanOut(routes: readonly SourceRoute[], event: RoutedEvent): FanOut {
  const subject = routes.some(({ rules }) => rules.filter !== null) ? filterSubject(event) : null;
  const matched: SourceRoute[] = [];
  const filtered: string[] = [];
  for (const route of routes) {
    if (route.rules.filter && subject && !route.rules.filter(subject)) filtered.push(route.rules.name);
    else matched.push(route);
  }
  return { primary: matched[0] ?? null, further: matched.slice(1), filtered };
}

/**
 * The fan-out of an event whose own route's gate (or ordering) held its first consumption: written all the same, so a
 * held route never delays the others. Its routes are recorded on the receipt (whose own delivery then waits alone,
 * and runs that route alone when it goes), and each further delivery is written pending, due at once, to be admitted
 * at its own route's gate and attempted on its own message, as any later attempt is (deliveries.ts).
 */
export function heldFanOut(fanOut: FanOut, at: number, orderingKey: string | null): FannedOut {
  return {
    route: fanOut.primary?.rules.name ?? null,
    filtered: fanOut.filtered,
    further: fanOut.further.map((route) => notAttempted(route.rules.name, at, 0, routeOrderingKey(route, orderingKey))),
  };
}

/**
 * What a further delivery's row keeps of its event's ordering value (the receipt's `ordering_key`): all of it when its
 * route has `ordered_by`, nothing otherwise, so an unordered route's rows never enter the ordering index (migrations/0018).
 */
export function routeOrderingKey(route: SourceRoute, orderingKey: string | null): string | null {
  return route.rules.ordering ? orderingKey : null;
}

/** The skip reason of an event no route wanted. */
export function filteredOutReason(filtered: readonly string[]): string {
  return filtered.length === 1
    ? `filtered out by route ${filtered[0]}`
    : `filtered out by routes ${filtered.join(", ")}`;
}
