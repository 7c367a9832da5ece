import { and, eq, inArray, isNull, sql } from "drizzle-orm";
import { database } from "../db/client";
import { deliveries, receipts } from "../db/schema";
import { enqueueWork } from "../relay/enqueue";
import { loadSources } from "../sources/registry";
import { type ReplayOne, type ReplayRequester, replayReceipt } from "./replay";

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
  if (!(REPLAYABLE as readonly string[]).includes(delivery.status))
    return { kind: "delivered", receiptId, status: delivery.status };
  if (!receipt.bodyRetained) return { kind: "payload_expired", receiptId };
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

/** Dead further deliveries of `route` among `receiptIds`, reset and sent on one message per source. */
export async function replayDeadDeliveries(
  env: Env,
  route: string,
  receiptIds: readonly string[],
  now = Date.now(),
): Promise<string[]> {
  if (receiptIds.length === 0) return [];
  const db = database(env);
  const reset = await db
    .update(deliveries)
    .set(resetColumns(now))
    .where(
      and(
        inArray(deliveries.receiptId, [...receiptIds]),
        eq(deliveries.route, route),
        eq(deliveries.status, "dead"),
        isNull(deliveries.committedAt),
      ),
    )
    .returning({ receiptId: deliveries.receiptId });
  const ids = reset.map((row) => row.receiptId);
  if (ids.length === 0) return [];
  const sources = await db
    .select({ receiptId: receipts.receiptId, source: receipts.source })
    .from(receipts)
    .where(inArray(receipts.receiptId, ids));
  const bySource = new Map<string, string[]>();
  for (const { receiptId, source } of sources) bySource.set(source, [...(bySource.get(source) ?? []), receiptId]);
  for (const [source, ids] of bySource) await enqueueWork(env, source, ids, 0, { route });
  return ids.sort();
}

function resetColumns(now: number) {
  return {
    status: "pending" as const,
    attempts: 0,
    nextAttemptAt: now,
    leaseUntil: null,
    replayCount: sql`${deliveries.replayCount} + 1`,
    replayedAt: now,
  };
}
