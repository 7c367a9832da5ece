import { and, eq, lt, sql } from "drizzle-orm";
import { batchPerItem, perItem } from "../../db/batch";
import type { Database } from "../../db/client";
import { deliveries, receipts } from "../../db/schema";
import { askGates, type GatedDelivery, gateName, type Hold } from "../../gate/client";
import { logEvent } from "../../lib/log";
import type { SourceConfig, SourceRoute } from "../../sources/config";
import { databaseBindingIn } from "../../sources/databases";
import { clampQueueDelay, type QueueVerdict } from "../decide/decide";
import { type AbandonedLease, abandonedAttemptRows, LEASE_MS } from "../lease/lease";
import { orderedDeliveryKey, orderingHolds } from "./delivery-order";
import { holdRows } from "./hold-rows";

/**
 * The consumer's two calls to the delivery gates (src/gate/): `admitDeliveries` before any lease is taken (so a
 * delivery that must wait spends no attempt), `releaseDeliveries` (./delivery-release.ts) once the attempts have
 * committed. Every delivery
 * goes through them: the one a receipt row carries, and each further delivery of a source with several routes (on
 * its first attempt, in the fan-out, and on every later one). A route without control options is never asked about:
 * its deliveries pass through both at no cost.
 */

/**
 * How far ahead a rate-limited route's delivery may be given its send time and wait for it in its consumer (wall time,
 * not CPU): past one window + margin, so a backlog coming back from the queue (whole seconds late, and a batch's
 * timeout) finds its next send times still ahead and keeps the route sending at its limit.
 */
export const RATE_RESERVE_MS = 2000;

/**
 * Where a delivery's state lives: the receipt row (the delivery it carries), the delivery's own `deliveries` row,
 * or no row yet (a further delivery on its event's first attempt, whose row that attempt's commit writes).
 */
export type DeliveryRow = "receipt" | "delivery" | "none";

/** One delivery as the consumer has it: its receipt, the route it goes to, and its source's config. */
export interface DeliveryToAdmit {
  receiptId: string;
  source: string;
  config: SourceConfig | undefined;
  /** The route's name; its control (if any) is read from `config`. */
  route: string;
  row: DeliveryRow;
  /**
   * Set when the delivery is `processing` under a lease that ran out (its consumer died): its attempt was counted when
   * that lease was taken. It still asks the gate — a paused or limited route never re-attempts it — and, held, goes
   * back to pending with that count kept.
   */
  abandoned?: AbandonedLease;
}

/** The `abandoned` part of a delivery read `processing` (readiness let it through only once its lease ran out). */
export function abandonedLeaseOf(delivery: {
  receiptId: string;
  status: string;
  leaseGeneration: number;
  leaseUntil: number | null;
}): Pick<DeliveryToAdmit, "abandoned"> {
  if (delivery.status !== "processing") return {};
  const { receiptId, leaseGeneration: generation, leaseUntil } = delivery;
  return { abandoned: { receiptId, generation, leaseUntil } };
}

export function gatedDelivery(delivery: DeliveryToAdmit): GatedDelivery {
  // Within one route's gate a receipt has one delivery, so its receipt id names it.
  const { receiptId, source, route } = delivery;
  return { id: receiptId, source, route, control: routeOf(delivery)?.rules.control ?? null };
}

function routeOf({ config, route }: DeliveryToAdmit): SourceRoute | undefined {
  return config?.routes.find(({ rules }) => rules.name === route);
}

/**
 * Asks which deliveries may be attempted now: a delivery to an ordered route first checks that nothing earlier to
 * that route of the same ordering value is outstanding (delivery-order.ts); then the gates are asked about the rest. Those that must wait are put back: pending, due again when the check or the gate said (so the re-drive
 * counts their message alive), with a queue verdict to come back then. Nothing about their attempts or retry budget
 * changes. A delivery with no row yet gets its due time from the caller, who writes its row (`row: "none"`). Returns
 * the waiting ones' verdicts, keyed by the objects given; every other delivery may go.
 *
 * A caller that can wait before each send (`startAt`, filled by receipt id) lets a rate-limited route pace its
 * deliveries within the second: one whose send time is at most RATE_RESERVE_MS away is admitted for then, and its
 * attempt waits for it in-process (attempt-slots.ts), instead of going back on the queue for whole seconds.
 */
export async function admitDeliveries(
  env: Env,
  db: Database,
  deliveries: readonly DeliveryToAdmit[],
  now: number,
  atOnce: number,
  startAt?: Map<string, number>,
): Promise<Map<DeliveryToAdmit, QueueVerdict & { kind: "retry" }>> {
  const verdicts = new Map<DeliveryToAdmit, QueueVerdict & { kind: "retry" }>();
  // Every delivery to an ordered route first waits for the earlier ones of its value on that route: the receipt's own,
  // a further one on its event's first attempt (no row yet), or a further one in its own row.
  const ordered = deliveries.flatMap((delivery) => {
    const ordering = routeOf(delivery)?.rules.ordering;
    if (!ordering) return [];
    const fannedOut = (delivery.config?.routes.length ?? 1) > 1;
    return [{ delivery, receiptId: delivery.receiptId, route: delivery.route, ordering, fannedOut }];
  });
  const waiting = await orderingHolds(env, db, ordered, now);
  const waitingFor = new Map(
    ordered.flatMap(({ delivery, receiptId, route }) => {
      const wait = waiting.get(orderedDeliveryKey(receiptId, route));
      return wait ? [[delivery, wait] as const] : [];
    }),
  );
  // A delivery that waits for its turn never takes a gate's slot.
  const asked = deliveries.filter((delivery) => !waitingFor.has(delivery));
  const gated = asked.map(gatedDelivery);
  const { holds, startAt: paced } = gated.every((delivery) => delivery.control === null)
    ? { holds: new Map<string, Map<string, Hold>>(), startAt: new Map<string, Map<string, number>>() }
    : await askGates(env, gated, databaseBindingIn(env), now, {
        slotMs: LEASE_MS,
        atOnce,
        reserveMs: startAt ? RATE_RESERVE_MS : 0,
      });
  /** Rows to hold, grouped by what one UPDATE can write: the row kind, the route, and the due time. */
  const toHold = new Map<string, { row: DeliveryRow; route: string; delaySeconds: number; receiptIds: string[] }>();
  const hold = (delivery: DeliveryToAdmit, event: string, { waitMs, reason }: { waitMs: number; reason: string }) => {
    // A rate limit's wait is whole seconds already, and may be none: its turn is within reach by the time its caller
    // has sent its paced deliveries and sends it back (src/gate/decide.ts, rateLimitRecheckMs).
    const delaySeconds = clampQueueDelay(reason === "rate-limit" ? waitMs / 1000 : Math.max(1, waitMs / 1000));
    verdicts.set(delivery, { kind: "retry", delaySeconds });
    logEvent(event, {
      receipt: delivery.receiptId,
      source: delivery.source,
      route: delivery.route,
      reason,
      delaySeconds,
    });
    if (delivery.abandoned) return; // put back on its own (holdAbandoned), fenced by its lease
    const key = `${delivery.row}\u0000${delivery.route}\u0000${delaySeconds}`;
    const group = toHold.get(key) ?? { row: delivery.row, route: delivery.route, delaySeconds, receiptIds: [] };
    group.receiptIds.push(delivery.receiptId);
    toHold.set(key, group);
  };
  for (const [delivery, wait] of waitingFor) hold(delivery, "order.held", wait);
  asked.forEach((delivery, index) => {
    const name = gateName(gated[index]!.source, gated[index]!.route);
    const gateHold = holds.get(name)?.get(delivery.receiptId);
    if (gateHold) hold(delivery, "gate.held", gateHold);
    const at = paced.get(name)?.get(delivery.receiptId);
    if (at !== undefined) startAt?.set(delivery.receiptId, at);
  });
  for (const { row, route, delaySeconds, receiptIds } of toHold.values()) {
    if (row === "none") continue; // its caller writes its row
    // A release elsewhere may have woken one since its gate held it: that wake stands (hold-rows.ts).
    const rows = row === "receipt" ? { row } : { row, route };
    const held = await holdRows(db, rows, receiptIds, now + delaySeconds * 1000, { unlessWokenSince: now });
    if (held < receiptIds.length) logEvent("gate.hold_after_wake", { route, row, deliveries: receiptIds.length, held });
  }
  const abandonedHeld = [...verdicts].flatMap(([delivery, verdict]) =>
    delivery.abandoned ? [{ delivery, abandoned: delivery.abandoned, dueAt: now + verdict.delaySeconds * 1000 }] : [],
  );
  if (abandonedHeld.length > 0) await holdAbandoned(db, abandonedHeld, now);
  return verdicts;
}

/**
 * Held deliveries whose last lease ran out: pending again, due when the gate said, the abandoned attempt kept counted
 * (and, for a receipt, recorded as `unknown`, as a takeover records it: lease.ts). Fenced by the abandoned lease's
 * generation and expiry, so a lease another consumer has taken since is left alone.
 */
async function holdAbandoned(
  db: Database,
  held: readonly { delivery: DeliveryToAdmit; abandoned: AbandonedLease; dueAt: number }[],
  now: number,
): Promise<void> {
  const putBack = (dueAt: number) => ({ status: "pending" as const, leaseUntil: null, nextAttemptAt: dueAt });
  const receiptStillAbandoned = ({ delivery, abandoned }: (typeof held)[number]) =>
    and(
      eq(receipts.receiptId, delivery.receiptId),
      eq(receipts.status, "processing"),
      eq(receipts.leaseGeneration, abandoned.generation),
      lt(receipts.leaseUntil, now),
    );
  const onReceipts = held.filter(({ delivery }) => delivery.row === "receipt");
  // Kinds run in the order written: the abandoned attempt is recorded while its receipt is still `processing`.
  await batchPerItem(db, {
    furtherPutBack: perItem(
      held.filter(({ delivery }) => delivery.row === "delivery"),
      ({ delivery, abandoned, dueAt }) =>
        db
          .update(deliveries)
          .set(putBack(dueAt))
          .where(
            and(
              eq(deliveries.receiptId, delivery.receiptId),
              eq(deliveries.route, delivery.route),
              eq(deliveries.status, "processing"),
              eq(deliveries.leaseGeneration, abandoned.generation),
              lt(deliveries.leaseUntil, now),
            ),
          ),
    ),
    abandonedAttempts: perItem(onReceipts, (item) =>
      abandonedAttemptRows(
        db,
        receiptStillAbandoned(item),
        sql<number>`${item.abandoned.generation}`,
        sql<number>`${(item.abandoned.leaseUntil ?? now) - LEASE_MS}`,
        now,
      ),
    ),
    receiptsPutBack: perItem(onReceipts, (item) =>
      db.update(receipts).set(putBack(item.dueAt)).where(receiptStillAbandoned(item)),
    ),
  });
}
