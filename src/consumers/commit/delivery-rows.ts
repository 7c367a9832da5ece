import { and, eq, isNull, type SQL, sql } from "drizzle-orm";
import { database } from "../../db/client";
import { deliveries } from "../../db/schema";
import { prepare } from "../../db/statement-template";
import type { AttemptRun } from "../attempt/run-destination";
import type { AttemptFacts, Decision } from "../decide/decide";
import { abortUnlessChanged, effectStatements } from "./statements";

/**
 * The rows of further deliveries (migrations/0014): every matched route after the one the receipt row carries. A
 * first attempt inserts one row per further route, in its receipt's commit batch (fan-out.ts, commit.ts); each later
 * attempt of that delivery updates its own row (deliveries.ts), fenced by its own lease generation and guarded by
 * its own committed_at exactly as the receipt's are. A further delivery keeps its latest attempt in its row; it
 * writes no `attempts` rows.
 */

export interface FurtherDelivery {
  route: string;
  /** Null when its route's gate held it: not attempted, written pending (its decision says when it is due). */
  run: AttemptRun | null;
  decision: Decision;
  startedAt: number;
  finishedAt: number;
  /** The event's ordering value when this route has `ordered_by`, else null (migrations/0018). */
  orderingKey: string | null;
}

/** A further delivery not attempted (its gate held it, or its receipt's own route's did): due again after `delaySeconds`. */
export function notAttempted(
  route: string,
  at: number,
  delaySeconds: number,
  orderingKey: string | null,
): FurtherDelivery {
  return {
    route,
    orderingKey,
    run: null,
    startedAt: at,
    finishedAt: at,
    decision: { kind: "nothing", queue: { kind: "retry", delaySeconds }, record: null },
  };
}

export interface FannedOut {
  /** The route the receipt row carries; null when every route filtered the event out. */
  route: string | null;
  filtered: string[];
  further: FurtherDelivery[];
  /**
   * Set when the event's commit batch aborted (abort-outcome.ts): further effects are then not written with the
   * fan-out but left to their deliveries' own next attempt (due at once, on a message of its own).
   */
  deferEffects?: boolean;
}

/** What a decision writes into a delivery's row, whichever statement writes it. */
function outcomeColumns(decision: Decision, finishedAt: number, deferred: boolean) {
  if (deferred || decision.kind === "nothing") {
    // Not attempted for good: due again (after the lease race's delay, or at once), its attempt not counted.
    const delaySeconds = decision.queue.kind === "retry" ? decision.queue.delaySeconds : 0;
    return {
      status: "pending" as const,
      nextAttemptAt: finishedAt + delaySeconds * 1000,
      committedAt: null,
      processedAt: null,
      lastError: null,
      httpStatus: null,
      counted: false,
    };
  }
  if (decision.kind === "fail") {
    return {
      status: decision.receiptStatus,
      nextAttemptAt: decision.nextAttemptAt,
      committedAt: null,
      processedAt: null,
      lastError: decision.lastError,
      httpStatus: decision.attempt.httpStatus,
      counted: true,
    };
  }
  const { result } = decision;
  return {
    status: result.status,
    nextAttemptAt: null,
    committedAt: result.status === "skipped" ? null : finishedAt,
    processedAt: finishedAt,
    lastError:
      result.status === "skipped"
        ? result.reason.slice(0, 500)
        : result.status === "stale"
          ? (result.note ?? null)
          : null,
    httpStatus: result.status === "processed" ? (result.httpStatus ?? null) : null,
    counted: true,
  };
}

/** A further delivery's effect is written with its first attempt only when nothing can abort it on its own. */
function effectNow(delivery: FurtherDelivery, deferEffects: boolean): boolean {
  const plan = delivery.run?.plan;
  return (
    delivery.decision.kind === "commit" &&
    delivery.decision.result.status === "processed" &&
    !!plan &&
    !plan.versionGate &&
    !(deferEffects && plan.statements.length > 0)
  );
}

/** A further delivery that applied, its effect left to its delivery's next attempt: written pending, due at once. */
export function effectDeferred(delivery: FurtherDelivery, deferEffects: boolean): boolean {
  const { decision } = delivery;
  return decision.kind === "commit" && decision.result.status === "processed" && !effectNow(delivery, deferEffects);
}

/** The first attempt's row of every further route, and the effects of those that applied. */
export function furtherDeliveryStatements(d1: D1Database, receiptId: string, fanOut: FannedOut): D1PreparedStatement[] {
  const db = database({ DB: d1 });
  return fanOut.further.flatMap((delivery) => {
    const applies = effectNow(delivery, fanOut.deferEffects ?? false);
    const deferred = effectDeferred(delivery, fanOut.deferEffects ?? false);
    const { counted, ...columns } = outcomeColumns(delivery.decision, delivery.finishedAt, deferred);
    const row = db.insert(deliveries).values({
      receiptId,
      route: delivery.route,
      orderingKey: delivery.orderingKey,
      ...columns,
      attempts: counted ? 1 : 0,
      leaseGeneration: counted ? 1 : 0,
      attemptStartedAt: delivery.startedAt,
      attemptDurationMs: delivery.finishedAt - delivery.startedAt,
    });
    return [prepare(d1, row), ...(applies ? effectStatements(d1, delivery.run?.plan ?? null) : [])];
  });
}

/** One later attempt of a further delivery, as its consumer holds it. */
export interface DeliveryAttempt {
  receiptId: string;
  route: string;
  run: AttemptRun;
  decision: Decision;
  /** What the decision was made from (the route's retry policy, the attempt's number): a failed commit is decided again from it. */
  facts: AttemptFacts;
  startedAt: number;
  finishedAt: number;
  /** The generation this attempt holds: its lease's, or the next one for a lease-free attempt. */
  generation: number;
  leased: boolean;
}

/** The statements that write a later attempt's decision into its delivery's row. */
export function deliveryOutcomeStatements(d1: D1Database, attempt: DeliveryAttempt): D1PreparedStatement[] {
  const db = database({ DB: d1 });
  const { decision } = attempt;
  const key = and(eq(deliveries.receiptId, attempt.receiptId), eq(deliveries.route, attempt.route));
  const unclaimed = and(key, isNull(deliveries.committedAt));
  // A redelivered message of a delivery that committed (a replay never reopens a committed one): nothing to write.
  if (decision.kind === "nothing") return [];
  const { counted: _counted, ...columns } = outcomeColumns(decision, attempt.finishedAt, false);
  const attemptColumns = {
    ...(attempt.leased ? {} : { attempts: sql`${deliveries.attempts} + 1` }),
    leaseGeneration: sql`MAX(${deliveries.leaseGeneration}, ${attempt.generation})`,
    leaseUntil: null,
    attemptStartedAt: attempt.startedAt,
    attemptDurationMs: attempt.finishedAt - attempt.startedAt,
  };
  const update = (where: SQL | undefined) =>
    prepare(
      d1,
      db
        .update(deliveries)
        .set({ ...attemptColumns, ...columns })
        .where(where),
    );
  if (decision.kind === "fail") {
    const stillOurs = attempt.leased
      ? and(unclaimed, eq(deliveries.leaseGeneration, attempt.generation), eq(deliveries.status, "processing"))
      : and(unclaimed, eq(deliveries.leaseGeneration, attempt.generation - 1));
    return [update(stillOurs)];
  }
  if (decision.result.status === "skipped") return [update(unclaimed)];
  return [
    update(unclaimed),
    abortUnlessChanged(d1),
    ...effectStatements(d1, decision.result.status === "processed" ? attempt.run.plan : null),
  ];
}
