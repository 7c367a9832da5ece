import { parseJsonBody, valueAtPath } from "../providers/json";

/**
 * Per-route ordering (docs/routing.md "Ordering"): a route with `ordered_by` delivers the events that share an
 * ordering value one at a time, in received order (receipt id order). Pure: what the config says, the value an event
 * has, and whether a delivery must wait for the earlier ones still outstanding. The D1 read is in
 * src/consumers/gate/delivery-order.ts.
 */

export interface RouteOrdering {
  /** `subject`: the receipt's subject; `body`: a dotted path into the JSON body. */
  by: { kind: "subject" } | { kind: "body"; path: string };
  /** What an earlier dead delivery does to the later ones: hold them until it is replayed or dismissed, or not. */
  onDead: "block" | "skip";
  /** As written in config, for messages. */
  text: string;
}

/** The route options this module reads. */
export const ORDERING_KEYS = ["ordered_by", "on_dead"] as const;
const ON_DEAD = ["block", "skip"] as const;
const BODY_PATH = /^body(\.[A-Za-z0-9_$-]+)+$/;
/** Ordering values longer than this are cut: they are compared as text, and each one is an index entry. */
export const MAX_ORDERING_VALUE_LENGTH = 512;

/** The route's ordering, or null when it sets none; each problem is pushed, prefixed with `where`. */
export function parseOrdering(table: Record<string, unknown>, where: string, problems: string[]): RouteOrdering | null {
  const { ordered_by: orderedBy, on_dead: onDead } = table;
  if (orderedBy === undefined) {
    if (onDead !== undefined) problems.push(`${where}: on_dead applies to an ordered route only: give ordered_by too`);
    return null;
  }
  let by: RouteOrdering["by"] | null = null;
  if (orderedBy === "subject") by = { kind: "subject" };
  else if (typeof orderedBy === "string" && BODY_PATH.test(orderedBy))
    by = { kind: "body", path: orderedBy.slice("body.".length) };
  else
    problems.push(
      `${where}: ordered_by must be "subject" or a dotted path into the body such as "body.data.account" (got ${JSON.stringify(orderedBy)})`,
    );
  if (onDead !== undefined && !ON_DEAD.includes(onDead as (typeof ON_DEAD)[number]))
    problems.push(`${where}: on_dead must be "block" or "skip" (got ${JSON.stringify(onDead)})`);
  if (by === null) return null;
  return { by, onDead: onDead === "skip" ? "skip" : "block", text: orderedBy as string };
}

/**
 * The event's ordering value: its subject, or the string, number or boolean at the body path, as text. Null when it
 * has none (no subject, no such field, an object or array there, a body that is not JSON): such an event is not
 * ordered, and holds nothing back.
 */
export function orderingValue(
  ordering: RouteOrdering,
  event: { subjectId: string | null; body: Uint8Array | null },
): string | null {
  let value: unknown;
  if (ordering.by.kind === "subject") value = event.subjectId;
  else value = event.body ? valueAtPath(parseJsonBody(event.body), ordering.by.path) : undefined;
  if (typeof value === "number" || typeof value === "boolean") value = String(value);
  if (typeof value !== "string" || value.length === 0) return null;
  return value.slice(0, MAX_ORDERING_VALUE_LENGTH);
}

/** An earlier delivery with the same ordering value that has not finished (or is dead), as D1 has it. */
export interface EarlierDelivery {
  status: string;
  nextAttemptAt: number | null;
  leaseUntil: number | null;
}

/** How soon a waiting delivery looks again while the one before it is in flight or due now. */
export const ORDER_RECHECK_MS = 2_000;
/** How soon it looks again while the one before it is dead: until someone replays or dismisses it. */
export const DEAD_RECHECK_MS = 5 * 60_000;

/**
 * Whether a delivery must wait, and for how long: null when nothing earlier holds it. A dead one holds it unless
 * `on_dead = "skip"`. The wait is the soonest any earlier one could finish: its scheduled retry (the waiting delivery
 * comes a second after it), a short recheck while one is due or in flight, a long one while one is dead.
 */
export function orderingWait(
  ordering: RouteOrdering,
  earlier: readonly EarlierDelivery[],
  now: number,
): { waitMs: number; reason: string } | null {
  const holding = earlier.filter((delivery) => delivery.status !== "dead" || ordering.onDead === "block");
  if (holding.length === 0) return null;
  const waits = holding.map((delivery) => {
    if (delivery.status === "dead") return DEAD_RECHECK_MS;
    if (delivery.status === "pending" && delivery.nextAttemptAt !== null && delivery.nextAttemptAt > now)
      return delivery.nextAttemptAt - now + 1_000;
    return ORDER_RECHECK_MS;
  });
  const dead = holding.some((delivery) => delivery.status === "dead");
  return {
    waitMs: Math.min(...waits),
    reason: dead ? `ordered by ${ordering.text}: an earlier delivery is dead` : `ordered by ${ordering.text}`,
  };
}
