import { and, inArray } from "drizzle-orm";
import { database } from "../../db/client";
import { inJsonList } from "../../db/id-list";
import { receipts } from "../../db/schema";
import { recordAttempt } from "../../lib/analytics";
import { logEvent, logsSuccesses } from "../../lib/log";
import type { SourceConfig, SourceRoute } from "../../sources/config";
import { DEFAULT_RETRY, type RetryPolicy, reachesOutsideD1, retryPolicyOf } from "../../sources/config";
import { loadSources, sourceProblems } from "../../sources/registry";
import { attemptClock, inAttemptSlots } from "../attempt/attempt-slots";
import { type AttemptRun, runDestination } from "../attempt/run-destination";
import { ATTEMPTS_IN_FLIGHT, externalCallBudgetMs, longestAttemptMs, mayStartAttempt } from "../attempt/slice-budget";
import { commitAttempts } from "../commit/commit";
import type { FinishedAttempt } from "../commit/commit-statements";
import { type FannedOut, notAttempted } from "../commit/delivery-rows";
import {
  ABANDONED_ATTEMPT,
  budgetStartOf,
  type Decision,
  decide,
  decideAbandoned,
  type QueueVerdict,
} from "../decide/decide";
import { sendDeliveryRetries } from "../deliveries/delivery-retries";
import { chooseRoute, filteredOutReason, heldFanOut, type RouteChoice, routeOrderingKey } from "../deliveries/fan-out";
import { writeHeldFanOuts } from "../deliveries/held-fan-out";
import {
  forgetDeadListenDeliveries,
  forgetListenDeliveriesMarkedDead,
  furtherDeliveriesCommitted,
} from "../deliveries/listen-deaths";
import { hadWaited, recoveredRoutes, releaseWaiting } from "../deliveries/release-waiting";
import {
  abandonedLeaseOf,
  admitDeliveries,
  type DeliveryToAdmit,
  heldHereKey,
  holdUntil,
  releaseDeliveries,
} from "../gate/delivery-gate";
import { LazyLease, LEASE_MS, LEASE_RACE_RETRY_SECONDS, leaseReceipts, releaseLeases } from "../lease/lease";
import { holdsRelayGrant } from "../lease/relay-grant";
import { loadReceipts, type ReceiptForWork, readiness } from "../load/load";

/**
 * Processing a consumer batch: read every receipt in one D1 call, lease only those whose destination reaches
 * outside D1, run each destination, decide each outcome (decide.ts, pure), and commit them all in one D1 batch
 * (commit.ts). Safe under any number of concurrent or repeated runs for one receipt: the receipt's commit guard
 * lets one run's effect commit, and a lease keeps a second forward out while the first is alive. The states
 * are listed in docs/processing.md, "The state of a receipt".
 */

/**
 * @param now the slice's start (epoch ms). Injected by tests to step through the retry schedule; elapsed real
 * time is added to it for each attempt's own start and end, so a forward late in a slice is signed with the time
 * it is sent, and durations stay true.
 * @param invocationEndsBy real time (Date.now()) by which the consumer invocation must be done: no attempt starts
 * that could outlast it (src/consumers/attempt/slice-budget.ts).
 * @param options.leaseEveryAttempt lease (and so count) every attempt, D1-only ones too: for receipts whose last
 * delivery died mid-attempt, run one at a time (queue.ts), so that a crash is charged to the receipt that caused it.
 * @param options.relayGranted receipts named by a first delivery of the relay's own message: each one still as the
 * relay left it holds its first lease by that grant (relay-grant.ts), so its first attempt writes no lease row.
 * @param options.followOn given, each receipt held here is added to `held` (keyed by `heldHereKey`), and one of
 * `held` that a release here woke is not sent on the queue but added to `woken`, for the caller to run next
 * (follow-on.ts); its verdict here stays the hold's.
 */
export async function processBatch(
  env: Env,
  receiptIds: readonly string[],
  now = Date.now(),
  invocationEndsBy = Number.POSITIVE_INFINITY,
  options: {
    leaseEveryAttempt?: boolean;
    relayGranted?: ReadonlySet<string>;
    followOn?: { held: Set<string>; woken: string[] };
  } = {},
): Promise<Map<string, QueueVerdict>> {
  // The slice's clock since it began, for a paced attempt's wait (attempt-slots.ts): its own work takes time too.
  const sliceClock = attemptClock(now);
  // Read the configuration before anything else: a broken table throws here and leaves every receipt untouched.
  const sources = loadSources(env);
  const broken = sourceProblems(env);
  const db = database(env);
  const unique = [...new Set(receiptIds)];
  const rows = await loadReceipts(db, unique, env);
  const verdicts = new Map<string, QueueVerdict>();
  for (const receiptId of unique) {
    if (!rows.some((row) => row.receiptId === receiptId)) {
      logEvent("process.receipt_missing", { receipt: receiptId });
      verdicts.set(receiptId, { kind: "done", status: "missing" });
    }
  }

  const ready: ReceiptForWork[] = [];
  for (const row of rows) {
    const state = readiness(row, now);
    if (state.kind === "ready") ready.push(row);
    else verdicts.set(row.receiptId, state.queue);
  }
  // A source whose table is broken keeps its receipts waiting (and retrying) until it is fixed: never dead.
  const unbroken = ready.filter((row) => !broken.has(row.source));
  const waitingForFix = ready.filter((row) => broken.has(row.source));
  if (waitingForFix.length > 0) {
    const delaySeconds = DEFAULT_RETRY.baseDelaySeconds;
    await holdUntil(
      db,
      waitingForFix.map((row) => row.receiptId),
      now + delaySeconds * 1000,
    );
    for (const row of waitingForFix) verdicts.set(row.receiptId, { kind: "retry", delaySeconds });
  }
  // A receipt still `processing` whose lease ran out: its attempt never finished (its consumer died, perhaps killed by
  // this very event). That attempt was counted when it took the lease; once the count spends the retry budget, the
  // receipt is dead without another run, so an event that crashes its consumer cannot loop.
  const abandoned = unbroken.filter((row) => row.status === "processing");
  const spent = abandoned
    .map((row) => abandonedAttempt(row, retryPolicyOf(sources.get(row.source), row.route), now))
    .filter((attempt) => attempt.decided?.kind === "fail" && attempt.decided.receiptStatus === "dead");
  // Which route each receipt runs: its own, or (a first attempt of a source with several) all that match (fan-out.ts).
  const choices = new Map(unbroken.map((row) => [row.receiptId, routeChoice(sources.get(row.source), row)]));
  // A route with delivery control (rate limit, in-flight limit, breaker, pause) is asked before any lease is taken,
  // so a delivery that must wait spends no attempt. An abandoned lease with retries left asks too: its route may have
  // been paused or limited since (held, it goes back to pending with its count kept: delivery-gate.ts).
  const spentIds = new Set(spent.map((attempt) => attempt.receipt.receiptId));
  const admissible = unbroken.filter(
    (row) =>
      row.committedAt === null &&
      (row.status === "pending" || (row.status === "processing" && !spentIds.has(row.receiptId))),
  );
  // A rate-limited route's delivery may be admitted for a moment within the next seconds, its attempt waiting for it
  // (attempt-slots.ts); not one whose attempt also carries further deliveries, admitted for now at their own gates.
  const startAt = new Map<string, number>();
  const own = admissible.flatMap((row) =>
    ownDelivery(row, sources.get(row.source), choices.get(row.receiptId) ?? null),
  );
  const carriesFurther = (delivery: DeliveryToAdmit) => {
    const choice = choices.get(delivery.receiptId);
    return choice?.kind === "fan-out" && choice.fanOut.further.length > 0;
  };
  const heldOwn = new Map([
    ...(await admitDeliveries(
      env,
      db,
      own.filter((delivery) => !carriesFurther(delivery)),
      // Asked at the slice's present, not its start: a send admitted for now leaves soon after the gate said so.
      sliceClock(),
      ATTEMPTS_IN_FLIGHT,
      startAt,
    )),
    ...(await admitDeliveries(env, db, own.filter(carriesFurther), now, ATTEMPTS_IN_FLIGHT)),
  ]);
  for (const [{ receiptId }, verdict] of heldOwn) verdicts.set(receiptId, verdict);
  for (const held of heldOwn.keys())
    if (!held.abandoned) options.followOn?.held.add(heldHereKey(held.source, held.route, held.receiptId));
  // A first consumption held there still fans out: its further deliveries are written now and go on their own
  // messages, each to its own route's gate; only the held route's delivery waits (fan-out.ts, `heldFanOut`).
  await writeHeldFanOuts(
    env,
    admissible.flatMap((receipt) => {
      const choice = choices.get(receipt.receiptId);
      return verdicts.has(receipt.receiptId) && choice?.kind === "fan-out"
        ? [{ receipt, fanOut: heldFanOut(choice.fanOut, now, receipt.orderingKey) }]
        : [];
    }),
  );
  const runnable = unbroken.filter((row) => !verdicts.has(row.receiptId) && !spentIds.has(row.receiptId));
  // Then the further deliveries of each fan-out that goes ahead, at their own routes' gates: one that must wait is
  // not attempted, and still gets its row (pending, due when its gate said) and its message.
  const furtherAsked = runnable
    .filter((row) => admissible.includes(row))
    .flatMap((row) => furtherDeliveries(row, sources.get(row.source), choices.get(row.receiptId) ?? null));
  const heldFurther = new Map<string, Map<string, number>>();
  for (const [{ receiptId, route }, verdict] of await admitDeliveries(env, db, furtherAsked, now, ATTEMPTS_IN_FLIGHT))
    heldFurther.set(receiptId, (heldFurther.get(receiptId) ?? new Map()).set(route, verdict.delaySeconds));
  const needsLease = runnable.filter(
    (row) =>
      row.committedAt === null &&
      (options.leaseEveryAttempt ||
        row.status === "processing" ||
        reachesOutside(choices.get(row.receiptId) ?? null)) &&
      !(!options.leaseEveryAttempt && options.relayGranted?.has(row.receiptId) && holdsRelayGrant(row)),
  );
  const leased = await leaseReceipts(
    db,
    needsLease.map((row) => row.receiptId),
    now,
    needsLease
      .filter((row) => row.status === "processing")
      .map((row) => ({ receiptId: row.receiptId, generation: row.leaseGeneration, leaseUntil: row.leaseUntil })),
  );

  const lostLeaseRace: ReceiptForWork[] = [];
  const toRun = runnable.filter((receipt) => {
    if (!needsLease.includes(receipt) || leased.has(receipt.receiptId)) return true;
    verdicts.set(receipt.receiptId, { kind: "retry", delaySeconds: LEASE_RACE_RETRY_SECONDS });
    lostLeaseRace.push(receipt);
    return false;
  });
  // Each attempt takes its own start: what a forward is signed with and a lazy lease starts at. A handler's external
  // call takes its lease lazily; losing that race ends the attempt as leased-elsewhere.
  const clock = attemptClock(now);
  const started = await inAttemptSlots(
    toRun,
    now,
    clock,
    async (receipt, startedAt, tooLate) => {
      const source = sources.get(receipt.source);
      const heldGeneration = leased.get(receipt.receiptId) ?? null;
      const limits = {
        invocationEndsBy,
        leaseUntil: heldGeneration === null ? Number.POSITIVE_INFINITY : now + LEASE_MS,
      };
      if (tooLate || !mayStartAttempt(limits, longestAttemptMs(source), Date.now(), startedAt))
        return { notStarted: receipt, heldGeneration };
      return attempt(
        env,
        receipt,
        startedAt,
        clock,
        LazyLease.onReceipt(db, receipt.receiptId, startedAt, heldGeneration),
        source,
        choices.get(receipt.receiptId) ?? null,
        externalCallBudgetMs(limits, Date.now(), startedAt),
        heldFurther.get(receipt.receiptId),
      );
    },
    { startAt: (receipt) => startAt.get(receipt.receiptId), clock: sliceClock },
  );
  const attempts = [...spent, ...started.filter((run): run is FinishedAttempt => "run" in run)];
  const notStarted = started.filter((run) => "notStarted" in run);
  if (notStarted.length > 0) {
    // Out of time for these: no attempt was made, so none is recorded. Their leases go back and they go back on
    // the queue at once, for a consumer with time left.
    await releaseLeases(
      db,
      notStarted.flatMap(({ notStarted: receipt, heldGeneration }) =>
        heldGeneration === null ? [] : [{ receiptId: receipt.receiptId, generation: heldGeneration }],
      ),
    );
    for (const { notStarted: receipt } of notStarted)
      verdicts.set(receipt.receiptId, { kind: "retry", delaySeconds: 0 });
  }
  const { decisions, fannedOut } = await commitAttempts(env, attempts);
  // A listen route's delivery that died, the receipt's own or a further one on its first attempt, is no longer
  // waiting for a listener (src/listen/hub.ts).
  await forgetDeadListenDeliveries(env, [
    ...attempts.map(({ receipt }) => {
      const choice = choices.get(receipt.receiptId);
      const route =
        choice?.kind === "recorded" ? choice.route : choice?.kind === "fan-out" ? choice.fanOut.primary : null;
      return {
        route,
        deliveryId: ownDeliveryId(receipt, sources.get(receipt.source), route),
        decision: decisions.get(receipt.receiptId),
      };
    }),
    ...furtherDeliveriesCommitted(sources, fannedOut),
  ]);
  // Free the gates' slots and tell each breaker how its destination answered (once committed: a crash before here
  // leaves the slot to expire, never frees it early).
  const ended = [
    ...started.map((run) =>
      "run" in run ? { receipt: run.receipt, result: run.run.result } : { receipt: run.notStarted, result: null },
    ),
    ...lostLeaseRace.map((receipt) => ({ receipt, result: null })),
  ];
  const furtherResults = new Map(
    attempts.flatMap(({ receipt, fanOut }) =>
      (fanOut?.further ?? []).map(({ route, run }) => [`${receipt.receiptId}\u0000${route}`, run?.result ?? null]),
    ),
  );
  const woken = await releaseDeliveries(
    env,
    [
      ...ended.flatMap(({ receipt, result }) =>
        ownDelivery(receipt, sources.get(receipt.source), choices.get(receipt.receiptId) ?? null).map((delivery) => ({
          ...delivery,
          result,
        })),
      ),
      // Every further delivery its gate let go: with its attempt's result, or none when it never ran.
      ...furtherAsked
        .filter(({ receiptId, route }) => !heldFurther.get(receiptId)?.has(route))
        .map((delivery) => ({
          ...delivery,
          result: furtherResults.get(`${delivery.receiptId}\u0000${delivery.route}`) ?? null,
        })),
    ],
    clock(),
    options.followOn?.held,
  );
  options.followOn?.woken.push(...woken);
  // Further deliveries that failed, met a lease race or were left their effect go on the queue on their own, each
  // naming its route: as their fan-out was written (an aborted commit may have left a route's effect to its delivery).
  await sendDeliveryRetries(env, fannedOut);
  // A delivery that had waited and now went through says its destination is back: the others waiting for it go now.
  await releaseWaiting(
    env,
    db,
    recoveredRoutes(
      attempts.map(({ receipt }) => {
        const choice = choices.get(receipt.receiptId);
        const decision = decisions.get(receipt.receiptId);
        return {
          source: receipt.source,
          route: choice?.kind === "recorded" ? choice.route : null,
          oneRoute: sources.get(receipt.source)?.routes.length === 1,
          waited: hadWaited(receipt),
          processed: decision?.kind === "commit" && decision.result.status === "processed",
        };
      }),
    ),
    now,
  );
  for (const finished of attempts) {
    const decision = decisions.get(finished.receipt.receiptId)!;
    verdicts.set(finished.receipt.receiptId, decision.queue);
    logAttempt(env, finished, decision);
  }
  return verdicts;
}

/** One receipt, for tests and callers outside a queue batch. */
export async function processReceipt(env: Env, receiptId: string, now = Date.now()): Promise<QueueVerdict> {
  return (await processBatch(env, [receiptId], now)).get(receiptId)!;
}

async function attempt(
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

/** The delivery a receipt row carries, as its route's gate is asked about it; none when no route runs. */
function ownDelivery(
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

/** A first attempt's further deliveries (its fan-out's other matched routes), which have no row yet. */
function furtherDeliveries(
  receipt: ReceiptForWork,
  config: SourceConfig | undefined,
  choice: RouteChoice | null,
): DeliveryToAdmit[] {
  if (choice?.kind !== "fan-out") return [];
  return choice.fanOut.further.map((route) => ({
    receiptId: receipt.receiptId,
    source: receipt.source,
    config,
    route: route.rules.name,
    row: "none" as const,
  }));
}

function routeChoice(source: SourceConfig | undefined, receipt: ReceiptForWork): RouteChoice | null {
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
function reachesOutside(choice: RouteChoice | null): boolean {
  if (choice === null || choice.kind === "gone") return false;
  if (choice.kind === "recorded") return reachesOutsideD1(choice.route.destination);
  return [choice.fanOut.primary, ...choice.fanOut.further].some((route) => reachesOutsideD1(route?.destination));
}

/**
 * The attempt that held a lease which ran out, as its last consumer left it: outcome unknown, counted already (when
 * it took the lease), and decided now, so the decision to give up is the same one a finished attempt gets.
 */
function abandonedAttempt(receipt: ReceiptForWork, policy: RetryPolicy | undefined, now: number): FinishedAttempt {
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

/**
 * A log line and a metrics point per attempt, from the decision that was committed — except for the routine
 * success: a processed attempt writes no point (the delivery's point already counts the event, and the receipt's
 * status and processed_at in D1 record the outcome), and its line only with LOG_SUCCESSES = "true". That keeps the
 * happy path to one Analytics Engine point per event (docs/performance.md, "What the figures decided").
 */
function logAttempt(env: Env, finished: FinishedAttempt, decision: Decision): void {
  const { receipt } = finished;
  const outcome =
    decision.kind === "commit"
      ? decision.result.status
      : decision.kind === "nothing"
        ? finished.run.result.status
        : decision.attempt.outcome;
  const httpStatus =
    decision.kind === "fail"
      ? decision.attempt.httpStatus
      : decision.kind === "commit" && decision.result.status === "processed"
        ? (decision.result.httpStatus ?? null)
        : null;
  const durationMs = finished.facts.finishedAt - finished.startedAt;
  if (outcome === "processed") {
    if (!logsSuccesses(env)) return;
  } else {
    recordAttempt(env, { source: receipt.source, outcome, httpStatus, durationMs, attempt: finished.generation });
  }
  logEvent("attempt", {
    source: receipt.source,
    eventKey: receipt.eventKey,
    eventType: receipt.eventType,
    receipt: receipt.receiptId,
    route: receipt.route,
    attempt: finished.generation,
    outcome,
    httpStatus,
    error:
      decision.kind === "fail"
        ? decision.lastError
        : decision.kind === "nothing"
          ? (decision.record?.note ?? "leased by another consumer")
          : null,
    note: decision.kind === "commit" && decision.result.status === "skipped" ? decision.result.reason : undefined,
    durationMs,
  });
}

/**
 * The dead-letter queue's verdict: the queue gave up on these receipts' message. Work still waiting or leased
 * in D1 is marked dead (payload kept, replayable); a receipt that already finished keeps its status.
 */
export async function markDead(env: Env, receiptIds: readonly string[], error: string): Promise<void> {
  if (receiptIds.length === 0) return;
  const marked = await database(env)
    .update(receipts)
    .set({ status: "dead", leaseUntil: null, nextAttemptAt: null, lastError: error })
    .where(and(inJsonList(receipts.receiptId, receiptIds), inArray(receipts.status, ["pending", "processing"])))
    .returning({ receiptId: receipts.receiptId, source: receipts.source, route: receipts.route });
  // A listen route's delivery marked dead here is no longer waiting for a listener, as one that died on its attempt.
  const sources = loadSources(env);
  await forgetListenDeliveriesMarkedDead(
    env,
    marked.map((receipt) => {
      const source = sources.get(receipt.source);
      // No route recorded on a source of several: its first attempt never ran, so no hub ever saw it.
      const route =
        receipt.route !== null
          ? source?.routes.find(({ rules }) => rules.name === receipt.route)
          : source?.routes.length === 1
            ? source.routes[0]
            : null;
      return { route, deliveryId: ownDeliveryId(receipt, source, route) };
    }),
  );
}

/** The id a receipt's own delivery goes by at its destination: with its route's name when its source has several. */
function ownDeliveryId(
  receipt: { receiptId: string },
  source: SourceConfig | undefined,
  route: SourceRoute | null | undefined,
): string {
  return (source?.routes.length ?? 1) > 1 && route ? `${receipt.receiptId}:${route.rules.name}` : receipt.receiptId;
}
