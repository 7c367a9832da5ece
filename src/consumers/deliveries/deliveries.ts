import { and, eq, inArray } from "drizzle-orm";
import { database } from "../../db/client";
import { inJsonList } from "../../db/id-list";
import { deliveries } from "../../db/schema";
import { logEvent } from "../../lib/log";
import { DEFAULT_RETRY, reachesOutsideD1, retryPolicyOf } from "../../sources/config";
import { loadSources, sourceProblems } from "../../sources/registry";
import { attemptClock, type ConnectionSlots, inAttemptSlots } from "../attempt/attempt-slots";
import { type AttemptRun, runDestination } from "../attempt/run-destination";
import { ATTEMPTS_IN_FLIGHT, externalCallBudgetMs, longestAttemptMs, mayStartAttempt } from "../attempt/slice-budget";
import { commitDeliveries } from "../commit/delivery-commit";
import type { DeliveryAttempt } from "../commit/delivery-rows";
import {
  ABANDONED_ATTEMPT,
  budgetStartOf,
  decide,
  decideAbandoned,
  NOT_STARTED,
  type QueueVerdict,
} from "../decide/decide";
import { abandonedLeaseOf, admitDeliveries, type DeliveryToAdmit } from "../gate/delivery-gate";
import { releaseDeliveries, type WokenHere } from "../gate/delivery-release";
import { leaseDeliveries, releaseDeliveryLeases } from "../lease/delivery-lease";
import { LazyLease, LEASE_MS, LEASE_RACE_RETRY_SECONDS } from "../lease/lease";
import { loadReceipts, type ReceiptForWork, readiness } from "../load/load";
import { forgetDeadListenDeliveries, forgetListenDeliveriesMarkedDead } from "./listen-deaths";
import { hadWaited, recoveredRoutes, releaseWaiting } from "./release-waiting";

/**
 * Later attempts of further deliveries (docs/processing.md, "Deliveries"): a queue message that names a route carries
 * its receipts' deliveries to that route alone. Each delivery lives as a receipt does — due or not, a lease only for
 * a forward, its attempts counted, its failure retried on its source's schedule or dead-lettered — in its own row,
 * so nothing here reads or moves the receipt's own route, or any other route's.
 */

/**
 * @param options.wokenHere given, a delivery a release here woke (in this database) is not sent on the queue but added
 * there, for the caller to run next (src/consumers/receipts/follow-on.ts).
 * @param options.connections the invocation's outgoing connections, shared with what it runs alongside
 * (attempt-slots.ts); unset, the slice's own ATTEMPTS_IN_FLIGHT.
 */
export async function processDeliveries(
  env: Env,
  route: string,
  receiptIds: readonly string[],
  now = Date.now(),
  invocationEndsBy = Number.POSITIVE_INFINITY,
  options: { leaseEveryAttempt?: boolean; wokenHere?: WokenHere[]; connections?: ConnectionSlots } = {},
): Promise<Map<string, QueueVerdict>> {
  // The slice's clock since it began, for a paced attempt's wait (attempt-slots.ts): its own work takes time too.
  const sliceClock = attemptClock(now);
  const sources = loadSources(env);
  const broken = sourceProblems(env);
  const db = database(env);
  const unique = [...new Set(receiptIds)];
  const [events, rows] = await Promise.all([
    loadReceipts(db, unique, env, true),
    db
      .select()
      .from(deliveries)
      .where(and(inJsonList(deliveries.receiptId, unique), eq(deliveries.route, route))),
  ]);
  const verdicts = new Map<string, QueueVerdict>();
  // Each delivery is read as a receipt is: its receipt's event and body, with the delivery's own state over them.
  const ready: ReceiptForWork[] = [];
  for (const receiptId of unique) {
    const event = events.find((row) => row.receiptId === receiptId);
    const row = rows.find((delivery) => delivery.receiptId === receiptId);
    if (!event || !row) {
      verdicts.set(receiptId, { kind: "done", status: "missing" });
      continue;
    }
    const delivery: ReceiptForWork = { ...event, ...row, replayedAt: row.replayedAt, route, filteredRoutes: null };
    const state = readiness(delivery, now);
    if (state.kind !== "ready") verdicts.set(receiptId, state.queue);
    else if (broken.has(delivery.source))
      verdicts.set(receiptId, { kind: "retry", delaySeconds: DEFAULT_RETRY.baseDelaySeconds });
    else ready.push(delivery);
  }
  const routeOf = (delivery: ReceiptForWork) =>
    sources.get(delivery.source)?.routes.find(({ rules }) => rules.name === route);
  // A delivery still `processing` was abandoned by a consumer that died: that attempt was counted when it took its
  // lease, and once the count spends the retries the delivery is dead without another run or a gate's slot (a poison
  // event cannot loop). One with retries left asks the gate as a pending one does: a paused or limited route never
  // re-attempts it (held, it is pending again with its count kept: delivery-gate.ts).
  const abandonedDecision = new Map(
    ready
      .filter((delivery) => delivery.status === "processing")
      .map((delivery) => [
        delivery.receiptId,
        decideAbandoned(delivery, retryPolicyOf(sources.get(delivery.source), route), now).decision,
      ]),
  );
  const spent = (delivery: ReceiptForWork) => {
    const decision = abandonedDecision.get(delivery.receiptId);
    return decision?.kind === "fail" && decision.receiptStatus === "dead";
  };
  // The route's gate (when it has delivery control) is asked before any lease is taken, as for a receipt: a delivery
  // that must wait spends no attempt, stays pending with the gate's due time, and comes back on a message of its own.
  const toAdmit = (delivery: ReceiptForWork): DeliveryToAdmit => ({
    receiptId: delivery.receiptId,
    source: delivery.source,
    config: sources.get(delivery.source),
    route,
    row: "delivery",
    ...abandonedLeaseOf(delivery),
  });
  // A rate-limited route's delivery may be admitted for a moment within the next seconds: its attempt waits for it.
  const startAt = new Map<string, number>();
  for (const [{ receiptId }, verdict] of await admitDeliveries(
    env,
    db,
    ready.filter((delivery) => delivery.committedAt === null && !spent(delivery)).map(toAdmit),
    // Asked at the slice's present, not its start: a send admitted for now leaves soon after the gate said so.
    sliceClock(),
    ATTEMPTS_IN_FLIGHT,
    startAt,
  ))
    verdicts.set(receiptId, verdict);
  const admitted = ready.filter((delivery) => !verdicts.has(delivery.receiptId));
  const needsLease = admitted.filter(
    (delivery) =>
      delivery.committedAt === null &&
      !spent(delivery) &&
      (options.leaseEveryAttempt ||
        delivery.status === "processing" ||
        reachesOutsideD1(routeOf(delivery)?.destination)),
  );
  const leased = await leaseDeliveries(
    db,
    route,
    needsLease.map((delivery) => delivery.receiptId),
    now,
  );

  const finished: DeliveryAttempt[] = [];
  const notStarted: { receiptId: string; generation: number }[] = [];
  // The same slots and attempt clock as a receipt's (attempt-slots.ts): at most ATTEMPTS_IN_FLIGHT at once, each
  // signed, leased and timed from its own start.
  const clock = attemptClock(now);
  await inAttemptSlots(
    admitted,
    now,
    clock,
    async (delivery, startedAt, tooLate) => {
      if (needsLease.includes(delivery) && !leased.has(delivery.receiptId))
        return verdicts.set(delivery.receiptId, { kind: "retry", delaySeconds: LEASE_RACE_RETRY_SECONDS });
      const source = sources.get(delivery.source);
      const heldGeneration = leased.get(delivery.receiptId) ?? null;
      const limits = {
        invocationEndsBy,
        leaseUntil: heldGeneration === null ? Number.POSITIVE_INFINITY : now + LEASE_MS,
      };
      const isSpent = spent(delivery);
      if (!isSpent && (tooLate || !mayStartAttempt(limits, longestAttemptMs(source), Date.now(), startedAt))) {
        // Out of time (or past its paced start): no attempt was made, so none is counted (its lease goes back below).
        if (heldGeneration !== null) notStarted.push({ receiptId: delivery.receiptId, generation: heldGeneration });
        return verdicts.set(delivery.receiptId, NOT_STARTED);
      }
      const policy = retryPolicyOf(source, route);
      const facts = {
        policy,
        attemptNumberInRun: delivery.attempts + 1,
        budgetStartedAt: budgetStartOf(delivery),
      };
      const configured = routeOf(delivery);
      let run: AttemptRun;
      if (delivery.committedAt !== null) run = { result: { status: "duplicate" }, plan: null };
      else if (isSpent) run = { result: { status: "unknown", error: ABANDONED_ATTEMPT }, plan: null };
      else if (!configured)
        run = { result: { status: "dead", error: `route ${route} is no longer configured` }, plan: null };
      else
        run = await runDestination(
          env,
          configured,
          delivery,
          startedAt,
          new LazyLease(
            async () =>
              (await leaseDeliveries(db, route, [delivery.receiptId], startedAt)).get(delivery.receiptId) ?? null,
            heldGeneration,
          ),
          true,
          externalCallBudgetMs(limits, Date.now(), startedAt),
        );
      const finishedAt = clock();
      const abandoned = abandonedDecision.get(delivery.receiptId);
      const decision = isSpent && abandoned ? abandoned : decide(run.result, { ...facts, finishedAt });
      finished.push({
        receiptId: delivery.receiptId,
        route,
        run,
        decision,
        facts: { ...facts, finishedAt },
        // A spent one is decided under the lease it was abandoned with (fenced by it, its count already taken), as
        // process.ts `abandonedAttempt` does for a receipt.
        startedAt: isSpent ? (delivery.leaseUntil ?? now) - LEASE_MS : startedAt,
        finishedAt,
        generation: isSpent ? delivery.leaseGeneration : (heldGeneration ?? delivery.leaseGeneration + 1),
        leased: isSpent || heldGeneration !== null,
      });
    },
    { startAt: (delivery) => startAt.get(delivery.receiptId), clock: sliceClock },
    options.connections,
  );
  await releaseDeliveryLeases(db, route, notStarted);
  for (const [receiptId, verdict] of await commitDeliveries(env, finished)) verdicts.set(receiptId, verdict);
  // A listen route's delivery that died is no longer waiting for a listener.
  const byReceipt = new Map(admitted.map((delivery) => [delivery.receiptId, delivery]));
  await forgetDeadListenDeliveries(
    env,
    finished.map((attempt) => {
      const delivery = byReceipt.get(attempt.receiptId);
      return {
        route: delivery && routeOf(delivery),
        deliveryId: `${attempt.receiptId}:${route}`,
        decision: attempt.decision,
      };
    }),
  );
  // Once committed, the gate hears how each admitted delivery ended (its slot freed, its breaker told); one that never
  // ran (a lease race, out of time) frees its slot and says nothing about the destination.
  const results = new Map(finished.map((attempt) => [attempt.receiptId, attempt.run.result]));
  await releaseDeliveries(
    env,
    admitted.map((delivery) => ({ ...toAdmit(delivery), result: results.get(delivery.receiptId) ?? null })),
    clock(),
    options.wokenHere,
  );
  // A delivery that had waited and now went through says its destination is back: the others waiting for it go now.
  const attempted = new Set(finished.map((attempt) => attempt.receiptId));
  await releaseWaiting(
    env,
    db,
    recoveredRoutes(
      admitted.flatMap((delivery) => {
        if (!attempted.has(delivery.receiptId)) return [];
        const verdict = verdicts.get(delivery.receiptId);
        return [
          {
            source: delivery.source,
            route: routeOf(delivery) ?? null,
            oneRoute: false,
            waited: hadWaited(delivery),
            processed: verdict?.kind === "done" && verdict.status === "processed",
          },
        ];
      }),
    ),
    now,
  );
  for (const attempt of finished)
    logEvent("attempt", {
      source: events.find((row) => row.receiptId === attempt.receiptId)?.source,
      receipt: attempt.receiptId,
      route,
      outcome: attempt.run.result.status,
      error: attempt.decision.kind === "fail" ? attempt.decision.lastError : null,
    });
  return verdicts;
}

/**
 * The dead-letter queue gave up on these deliveries' message (of `source`'s receipts): those still waiting or leased
 * are dead (replayable).
 */
export async function markDeliveriesDead(
  env: Env,
  source: string,
  route: string,
  receiptIds: readonly string[],
  error: string,
): Promise<void> {
  if (receiptIds.length === 0) return;
  const marked = await database(env)
    .update(deliveries)
    .set({ status: "dead", leaseUntil: null, nextAttemptAt: null, lastError: error })
    .where(
      and(
        inJsonList(deliveries.receiptId, receiptIds),
        eq(deliveries.route, route),
        inArray(deliveries.status, ["pending", "processing"]),
      ),
    )
    .returning({ receiptId: deliveries.receiptId });
  // A listen route's delivery marked dead here is no longer waiting for a listener, as one that died on its attempt.
  const configured = loadSources(env)
    .get(source)
    ?.routes.find(({ rules }) => rules.name === route);
  await forgetListenDeliveriesMarkedDead(
    env,
    marked.map(({ receiptId }) => ({ route: configured, deliveryId: `${receiptId}:${route}` })),
  );
}
