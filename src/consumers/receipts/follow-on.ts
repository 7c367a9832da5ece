import { database } from "../../db/client";
import type { QueueVerdict } from "../decide/decide";
import { holdUntil } from "../gate/delivery-gate";
import { processBatch } from "./process";

/**
 * An in-flight-capped route keeps its cap busy within one consumer invocation (issue 37 §4, docs/routing.md
 * "Delivery control"). A batch that brings a backlog of such a route has its gate admit as many as the cap allows and
 * hold the rest; each release frees a slot and wakes the oldest delivery waiting for one. When that woken delivery
 * is one this batch holds, it runs next here, through the whole path again (load, gate, lease, attempt, commit,
 * release: each delivery leased and committed as any, invariant 4), instead of a queue send, a batch timeout and a
 * new invocation for each. The gate still decides every admission, so the cap holds as it always did.
 */

/** Follow-on deliveries one slice runs at most: a counted bound, so one invocation cannot run on for ever. */
export const FOLLOW_ONS_PER_SLICE = 32;

/**
 * `processBatch` over `receiptIds`, then over each delivery a release woke among those it held, until none is woken
 * or FOLLOW_ONS_PER_SLICE have run. A woken delivery left over (the bound reached, or a round whose attempts could not
 * start, as when the invocation is out of time) goes back on the queue at once, due now, as a wake sends it.
 */
export async function processWithFollowOns(
  env: Env,
  receiptIds: readonly string[],
  invocationEndsBy: number,
  options: { leaseEveryAttempt?: boolean; relayGranted?: ReadonlySet<string> } = {},
): Promise<Map<string, QueueVerdict>> {
  // Every delivery held in this slice, in any round, and those of them a release woke.
  const followOn = { held: new Set<string>(), woken: [] as string[] };
  const wokenHere = followOn.woken;
  const verdicts = await processBatch(env, receiptIds, Date.now(), invocationEndsBy, { ...options, followOn });
  if (wokenHere.length === 0) return verdicts;
  const db = database(env);
  let followed = 0;
  while (wokenHere.length > 0 && followed < FOLLOW_ONS_PER_SLICE) {
    const next = wokenHere.splice(0, FOLLOW_ONS_PER_SLICE - followed);
    followed += next.length;
    // Held until the slot-wait fallback: due now, as a wake's queue send makes it (delivery-gate.ts, sendResumed).
    await holdUntil(db, next, Date.now());
    const round = await processBatch(env, next, Date.now(), invocationEndsBy, { ...options, followOn });
    for (const [receiptId, verdict] of round) verdicts.set(receiptId, verdict);
    // None of them ran (out of time, or leased elsewhere): stop here rather than wake and skip the rest in turn.
    if (next.every((receiptId) => round.get(receiptId)?.kind === "retry")) break;
  }
  if (wokenHere.length > 0) {
    await holdUntil(db, wokenHere, Date.now());
    for (const receiptId of wokenHere) verdicts.set(receiptId, { kind: "retry", delaySeconds: 0 });
  }
  return verdicts;
}
