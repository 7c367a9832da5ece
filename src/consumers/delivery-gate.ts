import { and, eq } from "drizzle-orm";
import type { Database } from "../db/client";
import { inJsonList } from "../db/id-list";
import { receipts } from "../db/schema";
import { askGates, type GatedDelivery, tellGates } from "../gate/client";
import type { AttemptVerdict } from "../gate/decide";
import { logError, logEvent } from "../lib/log";
import type { SourceConfig } from "../sources/config";
import { databaseBindingIn } from "../sources/databases";
import { type AttemptResult, clampQueueDelay, type QueueVerdict } from "./decide";
import { LEASE_MS } from "./lease";

/**
 * The consumer's two calls to the delivery gates (src/gate/): `admitDeliveries` before any lease is taken (so a
 * delivery that must wait spends no attempt), `releaseDeliveries` once the attempts have committed. A route
 * without control options is never asked about: its deliveries pass through both at no cost.
 */

/** A delivery as the consumer has it: the receipt (today, one route per source) and its source's config. */
export interface DeliveryToAdmit {
  receiptId: string;
  source: string;
  config: SourceConfig | undefined;
}

export function gatedDelivery({ receiptId, source, config }: DeliveryToAdmit): GatedDelivery {
  return { id: receiptId, source, route: config?.route.name ?? "", control: config?.route.control ?? null };
}

/**
 * Asks the gates which deliveries may be attempted now. Those that must wait are put back: pending, due again when
 * the gate said (so the re-drive counts their message alive), with a queue verdict to come back then. Nothing about
 * their attempts or retry budget changes. Returns the waiting ones' verdicts; every other delivery may go.
 */
export async function admitDeliveries(
  env: Env,
  db: Database,
  deliveries: readonly DeliveryToAdmit[],
  now: number,
  atOnce: number,
): Promise<Map<string, QueueVerdict>> {
  const gated = deliveries.map(gatedDelivery);
  if (gated.every((delivery) => delivery.control === null)) return new Map();
  const holds = await askGates(env, gated, databaseBindingIn(env), now, { slotMs: LEASE_MS, atOnce });
  const verdicts = new Map<string, QueueVerdict>();
  const byDelay = new Map<number, string[]>();
  for (const [receiptId, { waitMs, reason }] of holds) {
    const delaySeconds = clampQueueDelay(Math.max(1, waitMs / 1000));
    verdicts.set(receiptId, { kind: "retry", delaySeconds });
    byDelay.set(delaySeconds, [...(byDelay.get(delaySeconds) ?? []), receiptId]);
    logEvent("gate.held", { receipt: receiptId, reason, delaySeconds });
  }
  for (const [delaySeconds, receiptIds] of byDelay) await holdUntil(db, receiptIds, now + delaySeconds * 1000);
  return verdicts;
}

/** Tells the gates how the admitted attempts ended. A gate that does not answer is logged: its slots expire on their own. */
export async function releaseDeliveries(
  env: Env,
  finished: readonly (DeliveryToAdmit & { result: AttemptResult | null })[],
  now: number,
): Promise<void> {
  const gated = finished.map((delivery) => ({ ...gatedDelivery(delivery), verdict: attemptVerdict(delivery.result) }));
  if (gated.every((delivery) => delivery.control === null)) return;
  await tellGates(env, gated, now).catch((error) =>
    logError("gate.release_failed", error, { deliveries: gated.length }),
  );
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
 * A delivery that waits, or a broken source's receipt waiting for its fix: due again at `dueAt`, recorded as the due
 * time of the message that carries it back, so the cron's re-drive sees its message alive and sends no copy.
 */
export async function holdUntil(db: Database, receiptIds: readonly string[], dueAt: number): Promise<void> {
  await db
    .update(receipts)
    .set({ nextAttemptAt: dueAt })
    .where(and(inJsonList(receipts.receiptId, receiptIds), eq(receipts.status, "pending")));
}
