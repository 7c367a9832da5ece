import { and, eq, isNull, lt, lte, or, type SQL, sql } from "drizzle-orm";
import type { Database } from "../../db/client";
import { inJsonList, inJsonPairs } from "../../db/id-list";
import { attempts, receipts } from "../../db/schema";
import { PROCESSING_LEASE_MS } from "../../sources/config";
import { ABANDONED_ATTEMPT } from "../decide/decide";

/**
 * Leases: taken only where an attempt does something outside D1 (a forward, a handler's external call), because
 * only there could two consumers of one receipt both act. An in-Worker handler's D1 effect needs none — the
 * receipt's commit guard lets exactly one run commit — so the happy path pays no lease write.
 *
 * A lease takes the receipt's next `lease_generation`, which only ever increases (a replay never resets it):
 * every later state change of that attempt is conditional on it, so a consumer whose lease was taken over cannot
 * move the receipt under its successor.
 *
 * Taking a lease is also where a leased attempt is counted (`attempts + 1`, in the same row write): an attempt that
 * kills its isolate never reaches its commit, so a count kept only there would let a poison event loop forever.
 */
export const LEASE_MS = PROCESSING_LEASE_MS;
/** Retry-soon delay for a receipt whose lease another consumer took a moment ago. */
export const LEASE_RACE_RETRY_SECONDS = 5;

/** A lease that ran out under an attempt that never finished, as the consumer that takes the receipt over read it. */
export interface AbandonedLease {
  receiptId: string;
  generation: number;
  leaseUntil: number | null;
}

/** Thrown inside an attempt that needed the lease and found another consumer holding it. */
export class LeasedElsewhere extends Error {
  override name = "LeasedElsewhere";
}

/**
 * Leases every receipt in `receiptIds` that is free to take; returns the generation each one was leased at. Taking
 * over an `abandoned` lease records the attempt that held it as `unknown` in the same D1 call, only where the
 * takeover happened (its generation is then the next one): it may or may not have reached its destination.
 */
export async function leaseReceipts(
  db: Database,
  receiptIds: readonly string[],
  now: number,
  abandoned: readonly AbandonedLease[] = [],
): Promise<Map<string, number>> {
  if (receiptIds.length === 0) return new Map();
  const lease = db
    .update(receipts)
    .set({
      status: "processing",
      leaseUntil: now + LEASE_MS,
      leaseGeneration: sql`${receipts.leaseGeneration} + 1`,
      attempts: sql`${receipts.attempts} + 1`,
    })
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
  const presumedLost = abandoned.map(({ receiptId, generation, leaseUntil }) =>
    abandonedAttemptRows(
      db,
      and(
        eq(receipts.receiptId, receiptId),
        eq(receipts.leaseGeneration, generation + 1),
        eq(receipts.status, "processing"),
      ),
      sql<number>`${generation}`,
      sql<number>`${(leaseUntil ?? now) - LEASE_MS}`,
      now,
    ),
  );
  const [leased] = presumedLost.length === 0 ? [await lease] : await db.batch([lease, ...presumedLost]);
  return new Map(leased.map((row) => [row.receiptId, row.leaseGeneration]));
}

/**
 * An `unknown` attempt row for each receipt `where` picks, numbered `generation`: an attempt whose lease ran out
 * before it finished. A presumption: it never replaces a row, and the attempt's own outcome, should it still
 * arrive, replaces it (commit.ts).
 */
export function abandonedAttemptRows(
  db: Database,
  where: SQL | undefined,
  generation: SQL<number>,
  startedAt: SQL<number>,
  now: number,
) {
  return db
    .insert(attempts)
    .select(
      db
        .select({
          receiptId: receipts.receiptId,
          attemptNumber: generation.as("attempt_number"),
          startedAt: startedAt.as("started_at"),
          finishedAt: sql<number>`${now}`.as("finished_at"),
          outcome: sql<"unknown">`'unknown'`.as("outcome"),
          httpStatus: sql<null>`NULL`.as("http_status"),
          error: sql<string>`${ABANDONED_ATTEMPT}`.as("error"),
          durationMs: sql<number>`${now} - (${startedAt})`.as("duration_ms"),
        })
        .from(receipts)
        .where(where),
    )
    .onConflictDoNothing();
}

/**
 * Gives back leases this consumer took but will not use (it ran out of time before starting the attempt): the
 * receipt is pending again at once, and the attempt its lease counted is taken back. Fenced by generation, so a lease that has since passed to another consumer
 * is left alone.
 */
export async function releaseLeases(
  db: Database,
  held: readonly { receiptId: string; generation: number }[],
): Promise<void> {
  if (held.length === 0) return;
  await db
    .update(receipts)
    .set({ status: "pending", leaseUntil: null, attempts: sql`${receipts.attempts} - 1` })
    .where(
      and(
        isNull(receipts.committedAt),
        eq(receipts.status, "processing"),
        inJsonPairs(
          receipts.receiptId,
          receipts.leaseGeneration,
          held.map(({ receiptId, generation }) => [receiptId, generation] as const),
        ),
      ),
    );
}

/**
 * A lease taken on first need: the handler's first external call takes it, later calls reuse it. The routes of one
 * first attempt share it (they run at once under the receipt's one lease), so the taking is shared too.
 */
export class LazyLease {
  private generation: number | null;
  private taking: Promise<number | null> | null = null;
  constructor(
    private readonly take: () => Promise<number | null>,
    heldGeneration: number | null,
  ) {
    this.generation = heldGeneration;
  }

  /** The receipt's own lease. */
  static onReceipt(db: Database, receiptId: string, now: number, heldGeneration: number | null): LazyLease {
    return new LazyLease(
      async () => (await leaseReceipts(db, [receiptId], now)).get(receiptId) ?? null,
      heldGeneration,
    );
  }

  get heldGeneration(): number | null {
    return this.generation;
  }

  /** True when this attempt holds the lease (now or already). */
  async acquire(): Promise<boolean> {
    if (this.generation !== null) return true;
    this.taking ??= this.take();
    this.generation = await this.taking;
    return this.generation !== null;
  }
}
