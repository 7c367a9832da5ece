import type { RetryPolicy, SourceConfig } from "../../sources/config";
import { type AttemptRun, runDestination } from "../attempt/run-destination";
import type { FinishedAttempt } from "../commit/commit-statements";
import { type FannedOut, notAttempted } from "../commit/delivery-rows";
import { ABANDONED_ATTEMPT, budgetStartOf, decide, decideAbandoned } from "../decide/decide";
import { filteredOutReason, type RouteChoice, routeOrderingKey } from "../deliveries/fan-out";
import { type LazyLease, LEASE_MS } from "../lease/lease";
import type { ReceiptForWork } from "../load/load";

/**
 * One receipt's attempt as processBatch runs it (process.ts): the route(s) it runs, each destination's result, and the
 * facts its decision is made from; and the attempt an abandoned lease left behind, decided without running again.
 */

export async function attempt(
  env: Env,
  receipt: ReceiptForWork,
  startedAt: number,
  clock: () => number,
  lease: LazyLease,
  source: SourceConfig | undefined,
  choice: RouteChoice | null,
  externalBudgetMs: number,
  heldFurther: ReadonlyMap<string, number> = new Map(),
): Promise<FinishedAttempt> {
  let run: AttemptRun;
  let fanOut: FannedOut | undefined;
  // The receipt's own delivery is retried on its route's policy; each further delivery on its own route's (below).
  const ownRoute =
    choice?.kind === "recorded" ? choice.route : choice?.kind === "fan-out" ? choice.fanOut.primary : null;
  const facts = {
    policy: ownRoute?.retry ?? source?.retry,
    attemptNumberInRun: receipt.attempts + 1,
    budgetStartedAt: budgetStartOf(receipt),
  };
  if (receipt.committedAt !== null) {
    // A replay (or a redelivery after a lost ack) of an event whose outcome already committed: nothing to run, so
    // no forward or external call is even resent.
    run = { result: { status: "duplicate" }, plan: null };
  } else if (!source || !choice) {
    run = { result: { status: "dead", error: `source ${receipt.source} is no longer configured` }, plan: null };
  } else if (choice.kind === "gone") {
    run = { result: { status: "dead", error: `route ${choice.name} is no longer configured` }, plan: null };
  } else if (choice.kind === "recorded") {
    run = await runDestination(
      env,
      choice.route,
      receipt,
      startedAt,
      lease,
      source.routes.length > 1,
      externalBudgetMs,
    );
  } else {
    // The first attempt of an event with several routes: every matched route at once, each its own delivery.
    const { primary, further, filtered } = choice.fanOut;
    const [own, ...others] = await Promise.all([
      primary
        ? runDestination(env, primary, receipt, startedAt, lease, true, externalBudgetMs)
        : { result: { status: "skipped", reason: filteredOutReason(filtered) } as const, plan: null },
      ...further.map(async (route) => {
        const delaySeconds = heldFurther.get(route.rules.name);
        const orderingKey = routeOrderingKey(route, receipt.orderingKey);
        // Its gate said wait: not attempted, due again when the gate said (delivery-rows.ts writes it pending).
        if (delaySeconds !== undefined) return notAttempted(route.rules.name, startedAt, delaySeconds, orderingKey);
        const furtherRun = await runDestination(env, route, receipt, startedAt, lease, true, externalBudgetMs);
        const finishedAt = clock();
        return {
          route: route.rules.name,
          orderingKey,
          run: furtherRun,
          startedAt,
          finishedAt,
          decision: decide(furtherRun.result, { ...facts, policy: route.retry, attemptNumberInRun: 1, finishedAt }),
        };
      }),
    ]);
    run = own!;
    fanOut = { route: primary?.rules.name ?? null, filtered, further: others as FannedOut["further"] };
  }
  const generation = lease.heldGeneration ?? receipt.leaseGeneration + 1;
  return {
    receipt,
    run,
    facts: { ...facts, finishedAt: clock() },
    startedAt,
    generation,
    leased: lease.heldGeneration !== null,
    ...(fanOut ? { fanOut } : {}),
  };
}

/**
 * The attempt that held a lease which ran out, as its last consumer left it: outcome unknown, counted already (when
 * it took the lease), and decided now, so the decision to give up is the same one a finished attempt gets.
 */
export function abandonedAttempt(
  receipt: ReceiptForWork,
  policy: RetryPolicy | undefined,
  now: number,
): FinishedAttempt {
  const { facts, decision } = decideAbandoned(receipt, policy, now);
  return {
    receipt,
    run: { result: { status: "unknown", error: ABANDONED_ATTEMPT }, plan: null },
    facts,
    startedAt: (receipt.leaseUntil ?? now) - LEASE_MS,
    generation: receipt.leaseGeneration,
    leased: true,
    decided: decision,
  };
}
