import { and, eq, gt, inArray, isNotNull, isNull, sql } from "drizzle-orm";
import type { Database } from "../../db/client";
import { deliveries, receipts } from "../../db/schema";
import { logError, logEvent } from "../../lib/log";
import { enqueueWork, type SendOptions } from "../../relay/enqueue";
import type { SourceRoute } from "../../sources/config";

/**
 * A destination that is back releases the deliveries still waiting for it. While a destination is down, every
 * delivery to it fails and waits out its own retry delay; when one that waited succeeds, the others waiting for that
 * same route would otherwise each sit out the rest of their delay, however healthy the destination now is. So they
 * are made due at once and sent back on the queue (docs/processing.md, "When a destination comes back").
 *
 * Only a delivery that had failed before (a retry, `hadWaited`) can set this off: the happy path's first attempts
 * never do, and cost nothing here. A released delivery is due now with its attempts unchanged: it spends no retry,
 * and the message that was to bring it back later still comes, finds it finished (or leased, or due later) and does
 * what any early or repeated message does. Ordering and every gate still decide when it goes, as on any attempt.
 */

/** Deliveries per message sent: a relay batch's worth, so a large release spreads over the consumer's batches. */
const RELEASED_PER_MESSAGE = 50;
/**
 * Deliveries one release makes due, per route and table: one consumer invocation's UPDATE and queue sends stay
 * bounded however long the outage was. The rest follow: a released delivery keeps its counted attempts, so it
 * still reads as one that had waited (`hadWaited`), and its own success releases the next ones.
 */
export const RELEASED_AT_ONCE = 500;

/** A route whose destination answered a delivery that had waited. */
export interface RecoveredRoute {
  source: string;
  route: string;
  /** A source with one route: its receipt rows name none, and it has no further deliveries. */
  oneRoute: boolean;
}

/** One delivery whose attempt just committed: the receipt's own, or a further one in its `deliveries` row. */
export interface CommittedDelivery {
  source: string;
  /** The route it went to, as configured; null when no route ran. */
  route: SourceRoute | null;
  oneRoute: boolean;
  /** It had failed before (see `hadWaited`): only then does its success say the destination came back. */
  waited: boolean;
  processed: boolean;
}

/**
 * Whether a delivery read for an attempt had waited for its destination: an earlier attempt of it was counted (it
 * failed, or was abandoned, or was released after failing). A due time alone says nothing: a first attempt that was
 * re-driven, resumed, or written due at once by a held fan-out has one too, and its success must not make another
 * delivery's hour-long Retry-After due at once. The same fact for the receipt's own delivery and a further one. Pure.
 */
export function hadWaited(delivery: { attempts: number }): boolean {
  return delivery.attempts > 0;
}

/**
 * The routes to release, once each: those where a delivery that had waited was just processed. A route whose gate
 * paces it (rate limit, in-flight limit, pause) or that keeps an order is left alone: its gate or its order would
 * hold the released deliveries again, a written row each, for nothing. Pure.
 */
export function recoveredRoutes(committed: readonly CommittedDelivery[]): RecoveredRoute[] {
  const routes = new Map<string, RecoveredRoute>();
  for (const { source, route, oneRoute, waited, processed } of committed) {
    if (!waited || !processed || route === null || !releasable(route)) continue;
    routes.set(`${source}\u0000${route.rules.name}`, { source, route: route.rules.name, oneRoute });
  }
  return [...routes.values()];
}

function releasable(route: SourceRoute): boolean {
  const control = route.rules.control;
  if (route.rules.ordering) return false;
  return control === null || (control.rateLimit === null && control.maxInFlight === null && !control.paused);
}

/**
 * Makes the pending deliveries to these routes that are waiting past `now` due at once (up to RELEASED_AT_ONCE of
 * each table, the soonest due first), and sends them on the queue:
 * those receipt rows carry (one UPDATE through the retrying-receipts index, which holds only rows with a due time)
 * and, for a source with several routes, the further deliveries' rows (one UPDATE through the unfinished-deliveries
 * index, each row's source checked by its receipt's key). A failure is logged, never thrown: the attempts have
 * committed, and a delivery not released (or released and not sent) still comes back on the message it has.
 */
export async function releaseWaiting(env: Env, db: Database, routes: readonly RecoveredRoute[], now: number) {
  for (const route of routes)
    await releaseRoute(env, db, route, now).catch((error) =>
      logError("deliveries.release_failed", error, { source: route.source, route: route.route }),
    );
}

async function releaseRoute(env: Env, db: Database, recovered: RecoveredRoute, now: number) {
  const { source, route, oneRoute } = recovered;
  const statements = releaseStatements(db, recovered, now);
  const own = await statements.own;
  const further = oneRoute ? [] : await statements.further;
  await sendReleased(env, source, own, {});
  await sendReleased(env, source, further, { route });
  if (own.length + further.length > 0)
    logEvent("deliveries.released", { source, route, deliveries: own.length + further.length });
}

/**
 * The two UPDATEs, apart so that a test can ask SQLite how it runs them (each seeks its partial index). Each makes
 * its rows due `now` (never unscheduled: see RELEASED_AT_ONCE), at most `limit` of them, the soonest due first.
 */
export function releaseStatements(
  db: Database,
  { source, route, oneRoute }: RecoveredRoute,
  now: number,
  limit = RELEASED_AT_ONCE,
) {
  const waitingReceipts = db
    .select({ receiptId: receipts.receiptId })
    .from(receipts)
    .where(
      and(
        isNotNull(receipts.nextAttemptAt),
        gt(receipts.nextAttemptAt, now),
        // Not `eq`: the unary plus keeps SQLite off (source, event_key), which would read every receipt of the
        // source, and on the retrying index, which holds only the receipts with a due time.
        sql`+${receipts.source} = ${source}`,
        oneRoute ? isNull(receipts.route) : eq(receipts.route, route),
        eq(receipts.status, "pending"),
      ),
    )
    // Soonest due first, in the index's own order: ordering by id would have SQLite walk every receipt by key.
    .orderBy(receipts.nextAttemptAt)
    .limit(limit);
  const waitingDeliveries = db
    .select({ receiptId: deliveries.receiptId })
    .from(deliveries)
    .where(
      and(
        // Word for word the partial index's own condition, so SQLite seeks deliveries_unfinished.
        sql`${deliveries.status} IN ('pending', 'processing')`,
        gt(deliveries.nextAttemptAt, now),
        eq(deliveries.status, "pending"),
        eq(deliveries.route, route),
        sql`EXISTS (SELECT 1 FROM ${receipts} WHERE ${receipts.receiptId} = ${deliveries.receiptId} AND ${receipts.source} = ${source})`,
      ),
    )
    .orderBy(deliveries.nextAttemptAt)
    .limit(limit);
  return {
    own: db
      .update(receipts)
      .set({ nextAttemptAt: now })
      .where(inArray(receipts.receiptId, waitingReceipts))
      .returning({ receiptId: receipts.receiptId }),
    further: db
      .update(deliveries)
      .set({ nextAttemptAt: now })
      .where(and(eq(deliveries.route, route), inArray(deliveries.receiptId, waitingDeliveries)))
      .returning({ receiptId: deliveries.receiptId }),
  };
}

/** In received order (receipt ids are ULIDs), so the longest waiting go first. */
async function sendReleased(env: Env, source: string, rows: readonly { receiptId: string }[], options: SendOptions) {
  const receiptIds = rows.map((row) => row.receiptId).sort();
  for (let start = 0; start < receiptIds.length; start += RELEASED_PER_MESSAGE)
    await enqueueWork(env, source, receiptIds.slice(start, start + RELEASED_PER_MESSAGE), 0, options);
}
