import { and, eq, isNull, lte, or } from "drizzle-orm";
import type { Database } from "../../db/client";
import { inJsonList } from "../../db/id-list";
import { deliveries, receipts } from "../../db/schema";

/**
 * The due-time writes of waiting deliveries (delivery-gate.ts): a hold pushes a delivery's due time back, a wake
 * (or a resume) brings it forward to now. The due time is the due time of the message that carries the delivery
 * back, so the cron's re-drive sees its message alive and sends no copy.
 */

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

/** The same for further deliveries to `route`, in their own rows. */
export async function holdDeliveriesUntil(
  db: Database,
  route: string,
  receiptIds: readonly string[],
  dueAt: number,
): Promise<void> {
  await db
    .update(deliveries)
    .set({ nextAttemptAt: dueAt })
    .where(
      and(inJsonList(deliveries.receiptId, receiptIds), eq(deliveries.route, route), eq(deliveries.status, "pending")),
    );
}

/**
 * Deliveries held when they asked to go (by their gate, or behind an earlier one of their ordering value): due again
 * at `dueAt` — each unless a release has made it due since the hold was decided, at `askedAt`. Every delivery asked
 * about was due by then (its consumer read it ready), so a due time past `askedAt` is a later writer's: a release
 * that woke it (`dueNowByRow`, the gate's slot reserved for it, its consumer running it or its message sent), or a
 * consumer that held it or retried it and sent its message. Written over, a wake would be pushed back behind the
 * slot reserved for it, which then sits idle until the reservation lapses. Returns how many rows were held.
 */
export async function holdUnlessWoken(
  db: Database,
  row: "receipt" | "delivery",
  route: string,
  receiptIds: readonly string[],
  dueAt: number,
  askedAt: number,
): Promise<number> {
  const result =
    row === "receipt"
      ? await db
          .update(receipts)
          .set({ nextAttemptAt: dueAt })
          .where(
            and(
              inJsonList(receipts.receiptId, receiptIds),
              eq(receipts.status, "pending"),
              or(isNull(receipts.nextAttemptAt), lte(receipts.nextAttemptAt, askedAt)),
            ),
          )
      : await db
          .update(deliveries)
          .set({ nextAttemptAt: dueAt })
          .where(
            and(
              inJsonList(deliveries.receiptId, receiptIds),
              eq(deliveries.route, route),
              eq(deliveries.status, "pending"),
              or(isNull(deliveries.nextAttemptAt), lte(deliveries.nextAttemptAt, askedAt)),
            ),
          );
  return result.meta.changes;
}
