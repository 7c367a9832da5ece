import { and, eq, isNull, lte, or } from "drizzle-orm";
import type { Database } from "../../db/client";
import { inJsonList } from "../../db/id-list";
import { deliveries, receipts } from "../../db/schema";

/**
 * The due-time writes of waiting deliveries: a hold (delivery-gate.ts) pushes a delivery's due time back, a wake or a
 * resume (delivery-release.ts) brings it forward to now. The due time is the due time of the message that carries the delivery
 * back, so the cron's re-drive sees its message alive and sends no copy.
 */

/** Which rows a due-time write names: receipts (each carrying its own delivery), or further deliveries to `route`. */
export type HeldRows = { row: "receipt" } | { row: "delivery"; route: string };

/**
 * Pending deliveries due again at `dueAt`: a delivery that waits (its gate, its ordering value), one a release woke
 * (`dueAt` now), or a broken source's receipt waiting for its fix. Returns how many rows were written.
 *
 * With `unlessWokenSince` (a hold, decided when its consumer asked at that time), each row is held only if nobody has
 * made it due since. Every delivery asked about was due by then (its consumer read it ready), so a due time past
 * `unlessWokenSince` is a later writer's: a release that woke it (`dueNowByRow`, the gate's slot reserved for it, its
 * consumer running it or its message sent), or a consumer that held it or retried it and sent its message. Written
 * over, a wake would be pushed back behind the slot reserved for it, which then sits idle until the reservation lapses.
 *
 * @example
 * await holdRows(db, { row: "delivery", route: "billing" }, receiptIds, now + 5_000, { unlessWokenSince: now });
 */
export async function holdRows(
  db: Database,
  rows: HeldRows,
  receiptIds: readonly string[],
  dueAt: number,
  { unlessWokenSince }: { unlessWokenSince?: number } = {},
): Promise<number> {
  if (rows.row === "receipt") {
    const stillAsAsked =
      unlessWokenSince === undefined
        ? undefined
        : or(isNull(receipts.nextAttemptAt), lte(receipts.nextAttemptAt, unlessWokenSince));
    const result = await db
      .update(receipts)
      .set({ nextAttemptAt: dueAt })
      .where(and(inJsonList(receipts.receiptId, receiptIds), eq(receipts.status, "pending"), stillAsAsked));
    return result.meta.changes;
  }
  const stillAsAsked =
    unlessWokenSince === undefined
      ? undefined
      : or(isNull(deliveries.nextAttemptAt), lte(deliveries.nextAttemptAt, unlessWokenSince));
  const result = await db
    .update(deliveries)
    .set({ nextAttemptAt: dueAt })
    .where(
      and(
        inJsonList(deliveries.receiptId, receiptIds),
        eq(deliveries.route, rows.route),
        eq(deliveries.status, "pending"),
        stillAsAsked,
      ),
    );
  return result.meta.changes;
}
