import { and, asc, eq, lt, lte, or, sql } from "drizzle-orm";
import { decideAbandoned } from "../consumers/decide/decide";
import { database } from "../db/client";
import { deliveries, receipts } from "../db/schema";
import { logEvent } from "../lib/log";
import { enqueueWork } from "../relay/enqueue";
import { retryPolicyOf } from "../sources/config";
import { loadSources } from "../sources/registry";
import { redriveDueAt } from "./lease-return";
import { OVERDUE_GRACE_MS, REDRIVE_BATCH } from "./redrive";

/**
 * Re-drive of further deliveries (docs/processing.md, "Deliveries") whose queue message was lost. Unlike a receipt's
 * first attempt, a further delivery always has a due time while it is unfinished (its first attempt's retry, a
 * replay, a lease race, a resume), so the partial index deliveries_unfinished holds every one of them and nothing
 * else: those overdue by the grace period (or whose lease ran out) are claimed — due now, lease dropped, one UPDATE …
 * RETURNING so two overlapping runs never both send — and sent again on a message naming their route, marked
 * `redriven` as a receipt's is, so each runs under a counted lease. One whose lease ran out is decided first as the
 * receipt's lease return decides it (decideAbandoned): once its counted attempts spent the retries or max_age it is
 * dead, never handed back for one more run. `horizon` holds back what came due after the consumer's newest handled
 * probe (queue-probe.ts): a backlog is waited for, not sent twice.
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
    .select({
      receiptId: deliveries.receiptId,
      route: deliveries.route,
      status: deliveries.status,
      attempts: deliveries.attempts,
      leaseGeneration: deliveries.leaseGeneration,
      replayedAt: deliveries.replayedAt,
      receivedAt: receipts.receivedAt,
      source: receipts.source,
    })
    .from(deliveries)
    .innerJoin(receipts, eq(receipts.receiptId, deliveries.receiptId))
    .where(lost)
    .orderBy(asc(deliveries.nextAttemptAt))
    .limit(REDRIVE_BATCH);
  if (found.length === 0) return 0;
  const sources = loadSources(env);
  const spentError = (row: (typeof found)[number]): string | null => {
    if (row.status !== "processing") return null;
    const policy = retryPolicyOf(sources.get(row.source), row.route);
    const { decision } = decideAbandoned(row, policy, now);
    return policy !== undefined && decision.kind === "fail" && decision.receiptStatus === "dead"
      ? decision.lastError
      : null;
  };
  const verdicts = found.map((row) => ({ row, lastError: spentError(row) }));
  const keysOf = (picked: typeof verdicts) =>
    JSON.stringify(picked.map(({ row }) => [row.receiptId, row.route, row.leaseGeneration]));
  // Fenced by the generation read: a consumer that took the delivery over in between keeps it.
  const stillLost = (picked: typeof verdicts) =>
    and(
      lost,
      sql`(${deliveries.receiptId}, ${deliveries.route}, ${deliveries.leaseGeneration}) IN (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]'), json_extract(value, '$[2]') FROM json_each(${keysOf(picked)}))`,
    );
  const handedBack = verdicts.filter((verdict) => verdict.lastError === null);
  const spent = verdicts.filter((verdict) => verdict.lastError !== null);
  const [claimed, ...deadened] = await db.batch([
    db
      .update(deliveries)
      .set({ status: "pending", leaseUntil: null, nextAttemptAt: redriveDueAt(now) })
      .where(handedBack.length > 0 ? stillLost(handedBack) : sql`0`)
      .returning({ receiptId: deliveries.receiptId, route: deliveries.route }),
    ...spent.map((verdict) =>
      db
        .update(deliveries)
        .set({ status: "dead", leaseUntil: null, nextAttemptAt: null, lastError: verdict.lastError })
        .where(stillLost([verdict]))
        .returning({ receiptId: deliveries.receiptId }),
    ),
  ]);
  const dead = deadened.flat();
  if (dead.length > 0) logEvent("redrive.deliveries_abandoned_dead", { deliveries: dead.length });
  const sourceOf = new Map(found.map((row) => [row.receiptId, row.source]));
  const groups = new Map<string, { source: string; route: string; receiptIds: string[] }>();
  for (const { receiptId, route } of claimed) {
    const source = sourceOf.get(receiptId) ?? "";
    const key = `${source}\u0000${route}`;
    const group = groups.get(key) ?? { source, route, receiptIds: [] };
    group.receiptIds.push(receiptId);
    groups.set(key, group);
  }
  for (const { source, route, receiptIds } of groups.values())
    await enqueueWork(env, source, receiptIds, 0, { route, redriven: true });
  return claimed.length + dead.length;
}
