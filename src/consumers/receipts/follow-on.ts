import { database } from "../../db/client";
import { enqueueWork } from "../../relay/enqueue";
import type { QueueVerdict } from "../decide/decide";
import { processDeliveries } from "../deliveries/deliveries";
import { dueNowByRow, type WokenHere } from "../gate/delivery-gate";
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
  options: { leaseEveryAttempt?: boolean } = {},
): Promise<Map<string, QueueVerdict>> {
  const wokenHere: WokenHere[] = [];
  const verdicts = await processDeliveries(env, route, receiptIds, Date.now(), invocationEndsBy, {
    ...options,
    wokenHere,
  });
  if (wokenHere.length > 0)
    await followWoken(env, wokenHere, invocationEndsBy, { route, askedIds: new Set(receiptIds), verdicts });
  return verdicts;
}

/**
 * Runs each delivery a release woke in this database (`wokenHere`, which each run's releases add to), until none is
 * woken or FOLLOW_ONS_PER_SLICE have run. A woken delivery has a message of its own still on the queue (its hold's,
 * due at the slot-wait fallback): done, that message finds it done; sent back, it gets a message of its own now —
 * unless `answer` names it among the ids its caller was asked about (of the same kind), whose verdict it then sets. A
 * woken one left over (the bound reached, or a round none of whose attempts could start, as when the invocation is out
 * of time) goes back on the queue at once, due now, as a wake sends it.
 */
export async function followWoken(
  env: Env,
  wokenHere: WokenHere[],
  invocationEndsBy: number,
  answer?: { route: string; askedIds: ReadonlySet<string>; verdicts: Map<string, QueueVerdict> },
): Promise<void> {
  const db = database(env);
  const answers = (further: boolean, route: string) => {
    if (!answer) return () => false;
    const sameKind = further && answer.route === route;
    return (receiptId: string) => sameKind && answer.askedIds.has(receiptId);
  };
  let followed = 0;
  while (wokenHere.length > 0 && followed < FOLLOW_ONS_PER_SLICE) {
    const { source, route, receiptIds } = wokenHere.shift()!;
    const next = receiptIds.slice(0, FOLLOW_ONS_PER_SLICE - followed);
    if (next.length < receiptIds.length)
      wokenHere.unshift({ source, route, receiptIds: receiptIds.slice(next.length) });
    followed += next.length;
    let ranAny = false;
    // Due now (the gate has given each its slot), in runs of the row that carries each.
    for (const run of await dueNowByRow(db, route, next)) {
      const isAnswer = answers(run.further, route);
      const round = run.further
        ? await processDeliveries(env, route, run.receiptIds, Date.now(), invocationEndsBy, { wokenHere })
        : await processBatch(env, run.receiptIds, Date.now(), invocationEndsBy, { wokenHere });
      const sendBack = new Map<number, string[]>();
      for (const [receiptId, verdict] of round) {
        if (verdict.kind !== "retry" || verdict.delaySeconds > 0) ranAny = true;
        if (isAnswer(receiptId)) answer?.verdicts.set(receiptId, verdict);
        else if (verdict.kind === "retry")
          sendBack.set(verdict.delaySeconds, [...(sendBack.get(verdict.delaySeconds) ?? []), receiptId]);
      }
      for (const [delaySeconds, ids] of sendBack)
        await enqueueWork(env, source, ids, delaySeconds, run.further ? { route } : {});
    }
    // None of them ran (out of time, or leased elsewhere): stop here rather than wake and skip the rest in turn.
    if (!ranAny) break;
  }
  for (const { source, route, receiptIds } of wokenHere.splice(0))
    for (const run of await dueNowByRow(db, route, receiptIds)) {
      const isAnswer = answers(run.further, route);
      // One asked about goes back with its message's verdict; any other gets a message of its own, as a wake sends it.
      for (const receiptId of run.receiptIds.filter(isAnswer))
        answer?.verdicts.set(receiptId, { kind: "retry", delaySeconds: 0 });
      const others = run.receiptIds.filter((receiptId) => !isAnswer(receiptId));
      if (others.length > 0) await enqueueWork(env, source, others, 0, run.further ? { route } : {});
    }
}
