import { database } from "../../db/client";
import { enqueueWork } from "../../relay/enqueue";
import type { ConnectionSlots } from "../attempt/attempt-slots";
import { type QueueVerdict, retriesByDelay } from "../decide/decide";
import { processDeliveries } from "../deliveries/deliveries";
import { dueNowByRow, type WokenHere } from "../gate/delivery-release";
import { processBatch } from "./process";

/**
 * An in-flight-capped route keeps its cap busy (issue 37 §4, docs/routing.md "Delivery control"). Its gate keeps the
 * backlog: each delivery it holds for a slot waits in the gate's list, and each release frees a slot and wakes the
 * oldest. The consumer whose release woke it runs it next, in the same invocation, through the whole path again
 * (load, gate, lease, attempt, commit, release: each delivery leased and committed as any, invariant 4) — whichever
 * batch held it, and whether the receipt row or its own delivery row carries it — instead of a queue send, a batch
 * timeout and a new invocation each. The gate still decides every admission, so the cap holds as it always did.
 */

/** Follow-on deliveries one slice runs at most: a counted bound, so one invocation cannot run on for ever. */
export const FOLLOW_ONS_PER_SLICE = 32;

/**
 * `processDeliveries` over `receiptIds`' deliveries to `route` (a message naming the route), then its follow-ons
 * (`followWoken`). Answers verdicts for the asked ids only, for their message: a woken delivery to the same route among
 * them takes its follow-on's verdict in place of its hold's.
 */
export async function processDeliveriesWithFollowOns(
  env: Env,
  route: string,
  receiptIds: readonly string[],
  invocationEndsBy: number,
  options: { leaseEveryAttempt?: boolean; connections?: ConnectionSlots } = {},
): Promise<Map<string, QueueVerdict>> {
  const wokenHere: WokenHere[] = [];
  const verdicts = await processDeliveries(env, route, receiptIds, Date.now(), invocationEndsBy, {
    ...options,
    wokenHere,
  });
  if (wokenHere.length > 0)
    await followWoken(env, wokenHere, invocationEndsBy, {
      connections: options.connections,
      answer: { route, askedIds: new Set(receiptIds), verdicts },
    });
  return verdicts;
}

/** The verdicts a follow-on gives back to its caller's message (processDeliveriesWithFollowOns), and for which ids. */
interface Answer {
  route: string;
  askedIds: ReadonlySet<string>;
  verdicts: Map<string, QueueVerdict>;
}

/**
 * Runs each delivery a release woke in this database (`wokenHere`, which each run's releases add to), a round at a
 * time (`runRound`), until none is woken or FOLLOW_ONS_PER_SLICE have run; then sends back the rest (`sendBackRest`).
 * A woken delivery has a message of its own still on the queue (its hold's, due at the slot-wait fallback): done, that
 * message finds it done; sent back, it gets a message of its own now — unless `answer` names it among the ids its
 * caller was asked about (further deliveries to the same route), whose verdict it then sets. `connections` are the
 * invocation's (attempt-slots.ts), shared with whatever it runs alongside.
 */
export async function followWoken(
  env: Env,
  wokenHere: WokenHere[],
  invocationEndsBy: number,
  { answer, connections }: { answer?: Answer; connections?: ConnectionSlots } = {},
): Promise<void> {
  let followed = 0;
  while (wokenHere.length > 0 && followed < FOLLOW_ONS_PER_SLICE) {
    const { source, route, receiptIds } = wokenHere.shift()!;
    const next = receiptIds.slice(0, FOLLOW_ONS_PER_SLICE - followed);
    if (next.length < receiptIds.length)
      wokenHere.unshift({ source, route, receiptIds: receiptIds.slice(next.length) });
    followed += next.length;
    // None of them could start (out of time): stop here rather than wake and skip the rest in turn.
    const round = { source, route, receiptIds: next };
    if (!(await runRound(env, round, wokenHere, invocationEndsBy, answer, connections))) break;
  }
  await sendBackRest(env, wokenHere.splice(0), answer);
}

/**
 * One round: the woken deliveries of one route, due now (the gate has given each its slot), run through the whole
 * path in runs of the row that carries each; a release among them adds to `wokenHere`. A retry goes back on the queue
 * with its own delay (or to `answer`). Whether any of them ran: a verdict other than NOT_STARTED (an attempt the
 * invocation had no time left to start). A hold the gate answers with a 0 s delay, as a rate limit's rounded-down
 * wait, is a decision made, and the follow-ons go on.
 */
async function runRound(
  env: Env,
  { source, route, receiptIds }: WokenHere,
  wokenHere: WokenHere[],
  invocationEndsBy: number,
  answer: Answer | undefined,
  connections: ConnectionSlots | undefined,
): Promise<boolean> {
  let startedAny = false;
  for (const run of await dueNowByRow(database(env), route, receiptIds)) {
    const isAnswer = answers(answer, run.further, route);
    const round = run.further
      ? await processDeliveries(env, route, run.receiptIds, Date.now(), invocationEndsBy, { wokenHere, connections })
      : await processBatch(env, run.receiptIds, Date.now(), invocationEndsBy, { wokenHere, connections });
    for (const [receiptId, verdict] of round) {
      if (started(verdict)) startedAny = true;
      if (isAnswer(receiptId)) answer?.verdicts.set(receiptId, verdict);
    }
    for (const [delaySeconds, ids] of retriesByDelay([...round].filter(([receiptId]) => !isAnswer(receiptId))))
      await enqueueWork(env, source, ids, delaySeconds, run.further ? { route } : {});
  }
  return startedAny;
}

/** Whether a follow-on's verdict is a decision made here, anything but NOT_STARTED: a 0 s hold counts as one. */
export const started = (verdict: QueueVerdict): boolean => verdict.kind !== "retry" || verdict.notStarted !== true;

/**
 * The woken deliveries left over (the bound reached, or a round none of whose attempts could start) go back on the
 * queue at once, due now, as a wake sends them: one asked about goes back with its message's verdict, any other in a
 * message of its own.
 */
async function sendBackRest(env: Env, rest: readonly WokenHere[], answer: Answer | undefined): Promise<void> {
  for (const { source, route, receiptIds } of rest)
    for (const run of await dueNowByRow(database(env), route, receiptIds)) {
      const isAnswer = answers(answer, run.further, route);
      for (const receiptId of run.receiptIds.filter(isAnswer))
        answer?.verdicts.set(receiptId, { kind: "retry", delaySeconds: 0 });
      const others = run.receiptIds.filter((receiptId) => !isAnswer(receiptId));
      if (others.length > 0) await enqueueWork(env, source, others, 0, run.further ? { route } : {});
    }
}

/** Whether a woken delivery's verdict answers the caller's message: a further delivery to its route, asked about. */
function answers(answer: Answer | undefined, further: boolean, route: string): (receiptId: string) => boolean {
  if (!answer || !further || answer.route !== route) return () => false;
  return (receiptId) => answer.askedIds.has(receiptId);
}
