import { and, asc, eq, gt, isNull, lte, sql } from "drizzle-orm";
import { database } from "../db/client";
import { inJsonList } from "../db/id-list";
import { deliveries, receipts } from "../db/schema";
import { enqueueWork } from "../relay/enqueue";
import { loadSources } from "../sources/registry";
import { bodyStillKept } from "./replay-body";
import {
  checkFilter,
  type DeadReceiptFilter,
  eventMatching,
  type ReplayMany,
  type ReplayOne,
  type ReplayRequester,
  replayReceipt,
} from "./replay-receipts";

/**
 * Replaying one route's delivery of a receipt (docs/processing.md, "Deliveries"): only that route runs again. The
 * route the receipt row carries is replayed as the receipt is (replay.ts); a further route's delivery is reset in its
 * own row — a fresh retry budget, due at once, its lease generation carrying on — and sent on a message naming the
 * route. A delivery whose outcome committed has nothing left to run: it is reported, not reset.
 */

export type ReplayDelivery =
  | ReplayOne
  | { kind: "no_such_route"; receiptId: string; route: string }
  | { kind: "delivered"; receiptId: string; status: string };

/** Statuses a further delivery's replay starts from: those that never committed an outcome. */
const REPLAYABLE = ["dead", "skipped"] as const;

export async function replayDelivery(
  env: Env,
  receiptId: string,
  route: string,
  now = Date.now(),
  requestedBy: ReplayRequester | null = null,
): Promise<ReplayDelivery> {
  const db = database(env);
  const [receipt] = await db
    .select({
      source: receipts.source,
      route: receipts.route,
      bodyRetained: sql<number>`body IS NOT NULL OR body_location IS NOT NULL`,
      bodyLocation: receipts.bodyLocation,
    })
    .from(receipts)
    .where(eq(receipts.receiptId, receiptId));
  if (!receipt) return { kind: "not_found", receiptId };
  const ownRoute = receipt.route ?? loadSources(env).get(receipt.source)?.routes[0]?.rules.name ?? null;
  if (route === ownRoute) return replayReceipt(env, receiptId, now, requestedBy);
  const [delivery] = await db
    .select({ status: deliveries.status })
    .from(deliveries)
    .where(and(eq(deliveries.receiptId, receiptId), eq(deliveries.route, route)));
  if (!delivery) return { kind: "no_such_route", receiptId, route };
  if (delivery.status === "pending" || delivery.status === "processing")
    return { kind: "in_flight", receiptId, status: delivery.status };
  if (delivery.status === "dismissed") return { kind: "dismissed", receiptId };
  if (!(REPLAYABLE as readonly string[]).includes(delivery.status))
    return { kind: "delivered", receiptId, status: delivery.status };
  if (!bodyStillKept(env, receipt, now)) return { kind: "payload_expired", receiptId };
  const reset = await db
    .update(deliveries)
    .set(resetColumns(now))
    .where(
      and(
        eq(deliveries.receiptId, receiptId),
        eq(deliveries.route, route),
        eq(deliveries.status, delivery.status),
        isNull(deliveries.committedAt),
      ),
    )
    .returning({ receiptId: deliveries.receiptId });
  if (reset.length === 0) return { kind: "in_flight", receiptId, status: "changed" };
  await enqueueWork(env, receipt.source, [receiptId], 0, { route });
  return { kind: "replayed", receiptId, previousStatus: delivery.status };
}

/**
 * The dead further deliveries of `filter.route` whose events match `filter`, oldest first, up to its limit: reset as
 * one delivery's replay is and sent on one message per source naming the route; nothing else of those receipts runs.
 * Paged as a bulk replay of receipts is (`after`, `through`, `cursor`, `more`), so the two walk one order together.
 */
export async function replayDeadDeliveries(
  env: Env,
  filter: DeadReceiptFilter & { route: { name: string } },
  now = Date.now(),
): Promise<ReplayMany> {
  const chosen = await deadDeliveriesMatching(env, filter);
  const route = filter.route.name;
  const reset =
    chosen.length === 0
      ? []
      : await database(env)
          .update(deliveries)
          .set(resetColumns(now))
          .where(
            and(
              inJsonList(
                deliveries.receiptId,
                chosen.map((row) => row.receiptId),
              ),
              eq(deliveries.route, route),
              eq(deliveries.status, "dead"),
              isNull(deliveries.committedAt),
            ),
          )
          .returning({ receiptId: deliveries.receiptId });
  const receiptIds = reset.map((row) => row.receiptId).sort();
  const sourceOf = new Map(chosen.map((row) => [row.receiptId, row.source]));
  const bySource = new Map<string, string[]>();
  for (const receiptId of receiptIds) {
    const source = sourceOf.get(receiptId)!;
    bySource.set(source, [...(bySource.get(source) ?? []), receiptId]);
  }
  for (const [source, ids] of bySource) await enqueueWork(env, source, ids, 0, { route });
  const cursor = receiptIds.at(-1) ?? filter.through ?? filter.after ?? null;
  const [next] = await deadDeliveriesMatching(env, {
    ...filter,
    through: undefined,
    after: cursor ?? undefined,
    limit: 1,
  });
  return { replayed: receiptIds.length, receiptIds, more: next !== undefined, cursor };
}

/** The receipt ids of the oldest dead further deliveries matching `filter`: a replay's boundary, as oldestDeadMatching. */
export async function oldestDeadDeliveries(
  env: Env,
  filter: DeadReceiptFilter & { route: { name: string } },
): Promise<string[]> {
  return (await deadDeliveriesMatching(env, filter)).map((row) => row.receiptId);
}

async function deadDeliveriesMatching(
  env: Env,
  filter: DeadReceiptFilter & { route: { name: string } },
): Promise<{ receiptId: string; source: string }[]> {
  const limit = checkFilter(filter);
  return database(env)
    .select({ receiptId: deliveries.receiptId, source: receipts.source })
    .from(deliveries)
    .innerJoin(receipts, eq(receipts.receiptId, deliveries.receiptId))
    .where(
      and(
        eq(deliveries.route, filter.route.name),
        // A literal, as the partial index deliveries_dead is written: SQLite uses it only for a query that repeats it.
        sql`${deliveries.status} = 'dead'`,
        isNull(deliveries.committedAt),
        filter.after === undefined ? undefined : gt(deliveries.receiptId, filter.after),
        filter.through === undefined ? undefined : lte(deliveries.receiptId, filter.through),
        eventMatching(filter),
      ),
    )
    .orderBy(asc(deliveries.receiptId))
    .limit(limit);
}

export function resetColumns(now: number) {
  return {
    status: "pending" as const,
    attempts: 0,
    nextAttemptAt: now,
    leaseUntil: null,
    replayCount: sql`${deliveries.replayCount} + 1`,
    replayedAt: now,
  };
}
