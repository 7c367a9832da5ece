import { and, asc, eq, lt, lte, or, sql } from "drizzle-orm";
import { database } from "../db/client";
import { deliveries, receipts } from "../db/schema";
import { enqueueWork } from "../relay/enqueue";
import { OVERDUE_GRACE_MS, REDRIVE_BATCH } from "./redrive";

/**
 * Re-drive of further deliveries (docs/processing.md, "Deliveries") whose queue message was lost. Unlike a receipt's
 * first attempt, a further delivery always has a due time while it is unfinished (its first attempt's retry, a
 * replay, a lease race), so the partial index deliveries_unfinished holds every one of them and nothing else: those
 * overdue by the grace period (or whose lease ran out) are claimed — due now, lease dropped, one UPDATE … RETURNING so
 * two overlapping runs never both send — and sent again on a message naming their route. `horizon` holds back what
 * came due after the consumer's newest handled probe (queue-probe.ts): a backlog is waited for, not sent twice.
 */
export async function reenqueueLostDeliveries(
  env: Env,
  now: number,
  horizon = Number.POSITIVE_INFINITY,
): Promise<number> {
  const cutoff = Math.max(0, Math.min(now - OVERDUE_GRACE_MS, horizon));
  const db = database(env);
  // Written with literals, as the index is: SQLite uses a partial index only for a query that repeats its condition.
  const lost = and(
    sql`${deliveries.status} IN ('pending', 'processing')`,
    lte(deliveries.nextAttemptAt, cutoff),
    or(eq(deliveries.status, "pending"), lt(deliveries.leaseUntil, now)),
  );
  const found = await db
    .select({ receiptId: deliveries.receiptId, route: deliveries.route })
    .from(deliveries)
    .where(lost)
    .orderBy(asc(deliveries.nextAttemptAt))
    .limit(REDRIVE_BATCH);
  if (found.length === 0) return 0;
  const keys = JSON.stringify(found.map(({ receiptId, route }) => [receiptId, route]));
  const claimed = await db
    .update(deliveries)
    .set({ status: "pending", leaseUntil: null, nextAttemptAt: Math.min(now, Date.now()) })
    .where(
      and(
        lost,
        sql`(${deliveries.receiptId}, ${deliveries.route}) IN (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(${keys}))`,
      ),
    )
    .returning({ receiptId: deliveries.receiptId, route: deliveries.route });
  if (claimed.length === 0) return 0;
  const sources = await db
    .select({ receiptId: receipts.receiptId, source: receipts.source })
    .from(receipts)
    .where(
      sql`${receipts.receiptId} IN (SELECT value FROM json_each(${JSON.stringify(claimed.map((row) => row.receiptId))}))`,
    );
  const sourceOf = new Map(sources.map((row) => [row.receiptId, row.source]));
  const groups = new Map<string, { source: string; route: string; receiptIds: string[] }>();
  for (const { receiptId, route } of claimed) {
    const source = sourceOf.get(receiptId) ?? "";
    const key = `${source}\u0000${route}`;
    const group = groups.get(key) ?? { source, route, receiptIds: [] };
    group.receiptIds.push(receiptId);
    groups.set(key, group);
  }
  for (const { source, route, receiptIds } of groups.values()) await enqueueWork(env, source, receiptIds, 0, { route });
  return claimed.length;
}
