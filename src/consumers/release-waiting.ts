import { and, eq, gt, isNotNull, isNull } from "drizzle-orm";
import type { Database } from "../db/client";
import { receipts } from "../db/schema";
import { logError, logEvent } from "../lib/log";
import { enqueueWork } from "../relay/enqueue";
import type { SourceRoute } from "../sources/config";
import type { Decision } from "./decide";
import type { ReceiptForWork } from "./load";

/**
 * A destination that is back releases the deliveries still waiting for it. While a destination is down, every
 * delivery to it fails and waits out its own retry delay; when one that waited succeeds, the others waiting for that
 * same route would otherwise each sit out the rest of their delay, however healthy the destination now is. So they
 * are made due at once and sent back on the queue (docs/processing.md, "When a destination comes back").
 *
 * Only a delivery that waited (a retry, or one its breaker held) can set this off: the happy path's first attempts
 * never do, and cost nothing here. A released delivery is due now with its attempts unchanged: it spends no retry,
 * and the message that was to bring it back later still comes, finds it finished (or leased, or due later) and does
 * what any early or repeated message does. Ordering and every gate still decide when it goes, as on any attempt.
 */

/** Deliveries per message sent: a relay batch's worth, so a large release spreads over the consumer's batches. */
const RELEASED_PER_MESSAGE = 50;

/** A route whose destination answered a delivery that had waited: its source and the route the receipt rows carry. */
export interface RecoveredRoute {
  source: string;
  /** The receipt row's `route`: null for a source with one route (its rows name none). */
  route: string | null;
}

/** One finished attempt of a receipt's own delivery, as the consumer committed it. */
export interface CommittedOwnDelivery {
  receipt: Pick<ReceiptForWork, "source" | "route" | "nextAttemptAt">;
  route: SourceRoute | null;
  /** Whether the source has one route (its receipt rows name none). */
  oneRoute: boolean;
  decision: Decision | undefined;
}

/**
 * The routes to release, once each: those where a delivery that had waited (`nextAttemptAt` set when it was read)
 * was just processed. A route whose gate paces it (rate limit, in-flight limit, pause) or that keeps an order is
 * left alone: its gate or its order would hold the released deliveries again, a written row each, for nothing.
 * Pure.
 */
export function recoveredRoutes(committed: readonly CommittedOwnDelivery[]): RecoveredRoute[] {
  const routes = new Map<string, RecoveredRoute>();
  for (const { receipt, route, oneRoute, decision } of committed) {
    if (receipt.nextAttemptAt === null || route === null) continue;
    if (decision?.kind !== "commit" || decision.result.status !== "processed") continue;
    if (!releasable(route)) continue;
    const rowRoute = oneRoute ? null : receipt.route;
    if (!oneRoute && rowRoute === null) continue;
    routes.set(`${receipt.source}\u0000${rowRoute ?? ""}`, { source: receipt.source, route: rowRoute });
  }
  return [...routes.values()];
}

function releasable(route: SourceRoute): boolean {
  const control = route.rules.control;
  if (route.rules.ordering) return false;
  return control === null || (control.rateLimit === null && control.maxInFlight === null && !control.paused);
}

/**
 * Makes every pending delivery of these routes that is waiting past `now` due at once, and sends it on the queue.
 * One UPDATE per route, through the retrying-receipts index (only rows with a due time are in it). A failure is
 * logged, never thrown: the attempts have committed, and a delivery not released (or released and not sent) still
 * comes back on the message it already has.
 */
export async function releaseWaiting(env: Env, db: Database, routes: readonly RecoveredRoute[], now: number) {
  for (const route of routes)
    await releaseRoute(env, db, route, now).catch((error) =>
      logError("deliveries.release_failed", error, { source: route.source, route: route.route }),
    );
}

async function releaseRoute(env: Env, db: Database, { source, route }: RecoveredRoute, now: number): Promise<void> {
  const released = await db
    .update(receipts)
    .set({ nextAttemptAt: null })
    .where(
      and(
        isNotNull(receipts.nextAttemptAt),
        gt(receipts.nextAttemptAt, now),
        eq(receipts.source, source),
        route === null ? isNull(receipts.route) : eq(receipts.route, route),
        eq(receipts.status, "pending"),
      ),
    )
    .returning({ receiptId: receipts.receiptId });
  if (released.length === 0) return;
  // Received order (receipt ids are ULIDs), so the longest waiting go first.
  const receiptIds = released.map((row) => row.receiptId).sort();
  for (let start = 0; start < receiptIds.length; start += RELEASED_PER_MESSAGE)
    await enqueueWork(env, source, receiptIds.slice(start, start + RELEASED_PER_MESSAGE));
  logEvent("deliveries.released", { source, route, deliveries: receiptIds.length });
}
