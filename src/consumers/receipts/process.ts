import { database } from "../../db/client";
import { logEvent } from "../../lib/log";
import { DEFAULT_RETRY, retryPolicyOf } from "../../sources/config";
import { loadSources, sourceProblems } from "../../sources/registry";
import { attemptClock, type ConnectionSlots, inAttemptSlots } from "../attempt/attempt-slots";
import { ATTEMPTS_IN_FLIGHT, externalCallBudgetMs, longestAttemptMs, mayStartAttempt } from "../attempt/slice-budget";
import { commitAttempts } from "../commit/commit";
import type { FinishedAttempt } from "../commit/commit-statements";
import { NOT_STARTED, type QueueVerdict } from "../decide/decide";
import { sendDeliveryRetries } from "../deliveries/delivery-retries";
import { heldFanOut } from "../deliveries/fan-out";
import { writeHeldFanOuts } from "../deliveries/held-fan-out";
import { forgetDeadListenDeliveries, furtherDeliveriesCommitted } from "../deliveries/listen-deaths";
import { hadWaited, recoveredRoutes, releaseWaiting } from "../deliveries/release-waiting";
import { admitDeliveries, type DeliveryToAdmit } from "../gate/delivery-gate";
import { releaseDeliveries, type WokenHere } from "../gate/delivery-release";
import { holdRows } from "../gate/hold-rows";
import { LazyLease, LEASE_MS, LEASE_RACE_RETRY_SECONDS, leaseReceipts, releaseLeases } from "../lease/lease";
import { holdsRelayGrant } from "../lease/relay-grant";
import { loadReceipts, type ReceiptForWork, readiness } from "../load/load";
import { logAttempt } from "./log-attempt";
import { abandonedAttempt, attempt } from "./receipt-attempt";
import {
  attemptConnections,
  furtherDeliveries,
  ownDelivery,
  ownDeliveryId,
  reachesOutside,
  routeChoice,
} from "./route-choice";

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
 * delivery died mid-attempt, run one at a time (message-facts.ts inSlices), so that a crash is charged to the receipt that caused it.
 * @param options.relayGranted receipts named by a first delivery of the relay's own message: each one still as the
 * relay left it holds its first lease by that grant (relay-grant.ts), so its first attempt writes no lease row.
 * @param options.wokenHere given, a delivery a release here woke (in this database) is not sent on the queue but added
 * there, for the caller to run next (follow-on.ts); a woken one among `receiptIds` keeps its hold's verdict here.
 * @param options.connections the invocation's outgoing connections, shared with what it runs alongside
 * (attempt-slots.ts); unset, the slice's own ATTEMPTS_IN_FLIGHT.
 */
export async function processBatch(
  env: Env,
  receiptIds: readonly string[],
  now = Date.now(),
  invocationEndsBy = Number.POSITIVE_INFINITY,
  options: {
    leaseEveryAttempt?: boolean;
    relayGranted?: ReadonlySet<string>;
    wokenHere?: WokenHere[];
    connections?: ConnectionSlots;
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
    await holdRows(
      db,
      { row: "receipt" },
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
  // Past the connections one attempt may open, the rest are not asked now: each goes on its own message, due at once.
  const further = runnable
    .filter((row) => admissible.includes(row))
    .map((row) => furtherDeliveries(row, sources.get(row.source), choices.get(row.receiptId) ?? null));
  const furtherAsked = further.flatMap(({ withAttempt }) => withAttempt);
  const heldFurther = new Map<string, Map<string, number>>();
  const holdFurther = (receiptId: string, route: string, delaySeconds: number) =>
    heldFurther.set(receiptId, (heldFurther.get(receiptId) ?? new Map()).set(route, delaySeconds));
  for (const { receiptId, route } of further.flatMap(({ onTheirOwn }) => onTheirOwn)) holdFurther(receiptId, route, 0);
  for (const [{ receiptId, route }, verdict] of await admitDeliveries(env, db, furtherAsked, now, ATTEMPTS_IN_FLIGHT))
    holdFurther(receiptId, route, verdict.delaySeconds);
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
    options.connections,
    // A fan-out's first attempt opens a connection per route it sends to, and holds a slot for each.
    (receipt) => attemptConnections(choices.get(receipt.receiptId) ?? null, heldFurther.get(receipt.receiptId)),
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
    for (const { notStarted: receipt } of notStarted) verdicts.set(receipt.receiptId, NOT_STARTED);
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
  await releaseDeliveries(
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
    options.wokenHere,
  );
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
