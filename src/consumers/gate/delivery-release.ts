import { and, eq } from "drizzle-orm";
import { type Database, database } from "../../db/client";
import { inJsonList } from "../../db/id-list";
import { deliveries } from "../../db/schema";
import { gateName, tellGates } from "../../gate/client";
import type { AttemptVerdict } from "../../gate/decide";
import type { GateDelivery } from "../../gate/gate";
import { logError } from "../../lib/log";
import { enqueueWork } from "../../relay/enqueue";
import { startRecoveries } from "../../replay/route-recovery";
import { databaseBindingIn, envForDatabase } from "../../sources/databases";
import type { AttemptResult } from "../decide/decide";
import { type DeliveryToAdmit, gatedDelivery } from "./delivery-gate";
import { holdRows } from "./hold-rows";

/**
 * The consumer's second call to the delivery gates (src/gate/), once the attempts have committed: `releaseDeliveries`
 * frees their slots, tells each breaker how its destination answered, and wakes what waited. The first call,
 * `admitDeliveries`, is in ./delivery-gate.ts.
 */

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
