import { and, eq, isNull, lt, lte, or, sql } from "drizzle-orm";
import { inJsonList } from "../db/id-list";
import type { Database } from "../db/client";
import { receipts } from "../db/schema";
import { PROCESSING_LEASE_MS } from "../sources/config";

/**
 * Leases: taken only where an attempt does something outside D1 (a forward, a handler's external call), because
 * only there could two consumers of one receipt both act. An in-Worker handler's D1 effect needs none — the
 * receipt's commit guard lets exactly one run commit — so the happy path pays no lease write.
 *
 * A lease takes the receipt's next `lease_generation`, which only ever increases (a replay never resets it):
 * every later state change of that attempt is conditional on it, so a consumer whose lease was taken over cannot
 * move the receipt under its successor.
 */
export const LEASE_MS = PROCESSING_LEASE_MS;
/** Retry-soon delay for a receipt whose lease another consumer took a moment ago. */
export const LEASE_RACE_RETRY_SECONDS = 5;

/** Thrown inside an attempt that needed the lease and found another consumer holding it. */
export class LeasedElsewhere extends Error {
  override name = "LeasedElsewhere";
}

/** Leases every receipt in `receiptIds` that is free to take; returns the generation each one was leased at. */
export async function leaseReceipts(db: Database, receiptIds: readonly string[], now: number): Promise<Map<string, number>> {
  if (receiptIds.length === 0) return new Map();
  const leased = await db
    .update(receipts)
    .set({ status: "processing", leaseUntil: now + LEASE_MS, leaseGeneration: sql`${receipts.leaseGeneration} + 1` })
    .where(
      and(
        inJsonList(receipts.receiptId, receiptIds),
        isNull(receipts.committedAt),
        or(
          and(eq(receipts.status, "pending"), or(isNull(receipts.nextAttemptAt), lte(receipts.nextAttemptAt, now))),
          and(eq(receipts.status, "processing"), lt(receipts.leaseUntil, now)),
        ),
      ),
    )
    .returning({ receiptId: receipts.receiptId, leaseGeneration: receipts.leaseGeneration });
  return new Map(leased.map((row) => [row.receiptId, row.leaseGeneration]));
}

/**
 * Gives back leases this consumer took but will not use (it ran out of time before starting the attempt): the
 * receipt is pending again at once. Fenced by generation, so a lease that has since passed to another consumer
 * is left alone.
 */
export async function releaseLeases(db: Database, held: readonly { receiptId: string; generation: number }[]): Promise<void> {
  if (held.length === 0) return;
  await db
    .update(receipts)
    .set({ status: "pending", leaseUntil: null })
    .where(
      and(
        isNull(receipts.committedAt),
        eq(receipts.status, "processing"),
        sql`(${receipts.receiptId}, ${receipts.leaseGeneration}) IN (SELECT json_extract(value, '$[0]'), json_extract(value, '$[1]') FROM json_each(${JSON.stringify(held.map(({ receiptId, generation }) => [receiptId, generation]))}))`,
      ),
    );
}

/** A lease taken on first need: the handler's first external call takes it, later calls reuse it. */
export class LazyLease {
  private generation: number | null;
  constructor(
    private readonly db: Database,
    private readonly receiptId: string,
    private readonly now: number,
    heldGeneration: number | null,
  ) {
    this.generation = heldGeneration;
  }

  get heldGeneration(): number | null {
    return this.generation;
  }

  /** True when this attempt holds the lease (now or already). */
  async acquire(): Promise<boolean> {
    if (this.generation !== null) return true;
    this.generation = (await leaseReceipts(this.db, [this.receiptId], this.now)).get(this.receiptId) ?? null;
    return this.generation !== null;
  }
}
