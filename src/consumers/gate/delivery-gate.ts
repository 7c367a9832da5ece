import { and, eq, lt, sql } from "drizzle-orm";
import { batchPerItem, perItem } from "../../db/batch";
import { type Database, database } from "../../db/client";
import { inJsonList } from "../../db/id-list";
import { deliveries, receipts } from "../../db/schema";
import { askGates, type GatedDelivery, gateName, type Hold, tellGates } from "../../gate/client";
import type { AttemptVerdict } from "../../gate/decide";
import type { GateDelivery } from "../../gate/gate";
import { logError, logEvent } from "../../lib/log";
import { enqueueWork } from "../../relay/enqueue";
import { startRecoveries } from "../../replay/route-recovery";
import type { SourceConfig, SourceRoute } from "../../sources/config";
import { databaseBindingIn, envForDatabase } from "../../sources/databases";
import { type AttemptResult, clampQueueDelay, type QueueVerdict } from "../decide/decide";
import { type AbandonedLease, abandonedAttemptRows, LEASE_MS } from "../lease/lease";
import { orderedDeliveryKey, orderingHolds } from "./delivery-order";
import { holdRows } from "./hold-rows";

/**
 * The consumer's two calls to the delivery gates (src/gate/): `admitDeliveries` before any lease is taken (so a
 * delivery that must wait spends no attempt), `releaseDeliveries` once the attempts have committed. Every delivery
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

/** Deliveries a freed slot woke, of one route, for the caller to run in this invocation (`releaseDeliveries`). */
export interface WokenHere {
  source: string;
  route: string;
  receiptIds: string[];
}

/**
 * Tells the gates how the admitted attempts ended, and sends on at once the deliveries a freed slot woke (an
 * in-flight-capped route's next ones, oldest first). A gate that does not answer is logged: its slots expire on their
 * own; a woken delivery whose send fails looks again on its own (src/gate/decide.ts, SLOT_WAIT_FALLBACK_MS).
 *
 * Given `wokenHere`, a woken delivery whose row is in the caller's database (each one is, unless its source moved) is
 * not sent on the queue but added there, for the caller to run next in the same invocation
 * (src/consumers/receipts/follow-on.ts): the gate keeps the backlog and hands its next delivery on as one finishes,
 * with no queue round trip between them. Its slot is reserved for it as for any.
 */
export async function releaseDeliveries(
  env: Env,
  finished: readonly (DeliveryToAdmit & { result: AttemptResult | null })[],
  now: number,
  wokenHere?: WokenHere[],
): Promise<void> {
  const gated = finished.map((delivery) => ({ ...gatedDelivery(delivery), verdict: attemptVerdict(delivery.result) }));
  if (gated.every((delivery) => delivery.control === null)) return;
  const told = await tellGates(env, gated, now).catch((error) => {
    logError("gate.release_failed", error, { deliveries: gated.length });
    return { woken: [], recoveries: [] };
  });
  const here = databaseBindingIn(env);
  for (const { source, route, woken } of told.woken) {
    const runHere = wokenHere ? woken.filter(({ database: binding }) => binding === here) : [];
    if (runHere.length > 0) wokenHere?.push({ source, route, receiptIds: runHere.map(({ id }) => id) });
    const deliveries = woken.filter((delivery) => !runHere.includes(delivery));
    if (deliveries.length === 0) continue;
    await sendResumed(env, source, route, deliveries).catch((error) =>
      logError("gate.wake_failed", error, { route: gateName(source, route), deliveries: deliveries.length }),
    );
  }
  if (told.recoveries.length > 0)
    await startRecoveries(env, told.recoveries).catch((error) => logError("gate.recovery_failed", error, {}));
}

/**
 * What an attempt says about its destination, for the circuit breaker: a failure a retry might cure (an error
 * answer, a timeout) counts against it; a success clears it; anything else (never started, dead on config, a
 * duplicate) says nothing about the destination.
 */
export function attemptVerdict(result: AttemptResult | null): AttemptVerdict {
  if (result === null) return "neutral";
  if (result.status === "processed") return "success";
  if (result.status === "retry" || result.status === "unknown") return "failure";
  return "neutral";
}

/**
 * A resumed route's held deliveries (src/gate/gate.ts `resume`), or those a freed slot woke (`releaseDeliveries`),
 * sent on at once in received order: each is due now
 * and goes back on the queue, in one message per run of deliveries that share a database and a kind. A further
 * delivery (one with its own row for this route) goes in a message naming the route; the delivery a receipt row
 * carries, in a message of receipts. Should a send fail, each still comes back by itself within the pause's recheck
 * interval (src/gate/decide.ts).
 */
export async function sendResumed(
  env: Env,
  source: string,
  route: string,
  held: readonly GateDelivery[],
): Promise<void> {
  for (const [binding, receiptIds] of consecutiveByDatabase(held)) {
    const databaseEnv = envForDatabase(env, binding);
    for (const run of await dueNowByRow(database(databaseEnv), route, receiptIds)) {
      if (run.further) await enqueueWork(databaseEnv, source, run.receiptIds, 0, { route });
      else await enqueueWork(databaseEnv, source, run.receiptIds);
    }
  }
}

/**
 * Woken (or resumed) deliveries to `route`, due now, in runs of received order that share a row kind: a further
 * delivery's own row for the route, or the receipt row that carries the delivery. Due now, never NULL: a delivery
 * whose message is lost stays in the re-drive's indexes (deliveries_unfinished, receipts_retrying) and is found once
 * overdue (src/reconcile/redrive*.ts).
 */
export async function dueNowByRow(
  db: Database,
  route: string,
  receiptIds: readonly string[],
): Promise<{ further: boolean; receiptIds: string[] }[]> {
  const further = new Set(
    (
      await db
        .select({ receiptId: deliveries.receiptId })
        .from(deliveries)
        .where(and(inJsonList(deliveries.receiptId, receiptIds), eq(deliveries.route, route)))
    ).map((row) => row.receiptId),
  );
  const runs: { further: boolean; receiptIds: string[] }[] = [];
  for (const receiptId of receiptIds) {
    const last = runs[runs.length - 1];
    if (last && last.further === further.has(receiptId)) last.receiptIds.push(receiptId);
    else runs.push({ further: further.has(receiptId), receiptIds: [receiptId] });
  }
  const dueNow = Date.now();
  for (const run of runs) {
    await holdRows(db, run.further ? { row: "delivery", route } : { row: "receipt" }, run.receiptIds, dueNow);
  }
  return runs;
}

/** Runs of held deliveries in one database, in received order (a source moved between databases has two). */
function consecutiveByDatabase(held: readonly GateDelivery[]): [string, string[]][] {
  const runs: [string, string[]][] = [];
  for (const { id, database: binding } of held) {
    const last = runs[runs.length - 1];
    if (last && last[0] === binding) last[1].push(id);
    else runs.push([binding, [id]]);
  }
  return runs;
}
