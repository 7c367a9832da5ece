/** @module One database's slice of a quarantine page, and the quarantine list's shapes. */
import { and, asc, desc, eq, gt, lt, sql } from "drizzle-orm";
import type { Database } from "../../db/client";
import { d1NowMs } from "../../db/clock";
import { quarantine } from "../../db/schema";
import { type ReceiptCursor, relayedSinceRead } from "./receipt-cursor";

const quarantineColumns = {
  quarantineId: quarantine.quarantineId,
  source: quarantine.source,
  eventKey: quarantine.eventKey,
  reason: quarantine.reason,
  originalReceiptId: quarantine.originalReceiptId,
  originalSha256: quarantine.originalSha256,
  payloadSha256: quarantine.payloadSha256,
  receivedAt: quarantine.receivedAt,
  relayedAt: quarantine.relayedAt,
  /** Deliveries the row stands for: more than 1 for a key's copies past those kept whole, which keep no body. */
  copies: quarantine.copies,
  bodyRetained: sql<number>`${quarantine.body} IS NOT NULL`.mapWith(Boolean),
};

/**
 * One database's part of a quarantine page (newest first), in one D1 batch: its clock, the rows relayed behind the
 * reader since the cursor's read (through the `quarantine_relayed_at` index, in the order they were relayed), and
 * the `limit + 1` rows below the cursor's id. receipt-cursor.ts has the argument: it holds here as for receipts.
 */
export async function readQuarantineSlice(
  db: Database,
  options: { source?: string; cursor: ReceiptCursor | null; limit: number },
) {
  const ofSource = options.source !== undefined ? eq(quarantine.source, options.source) : undefined;
  const since = options.cursor ? relayedSinceRead(options.cursor, quarantine.relayedAt, quarantine.quarantineId) : null;
  const [clock, caughtUp, ahead] = await db.batch([
    db.select({ now: d1NowMs }).from(sql`(SELECT 1)`),
    db
      .select(quarantineColumns)
      .from(quarantine)
      .where(since ? and(ofSource, since, gt(quarantine.quarantineId, options.cursor!.receiptId)) : sql`0`)
      .orderBy(asc(quarantine.relayedAt), asc(quarantine.quarantineId))
      .limit(options.limit + 1),
    db
      .select(quarantineColumns)
      .from(quarantine)
      .where(and(ofSource, options.cursor ? lt(quarantine.quarantineId, options.cursor.receiptId) : undefined))
      .orderBy(desc(quarantine.quarantineId))
      .limit(options.limit + 1),
  ]);
  return { readAt: clock[0]!.now, caughtUp: caughtUp.map((row) => ({ row, at: row.relayedAt ?? 0 })), ahead };
}

export type QuarantineRow = Awaited<ReturnType<typeof readQuarantineSlice>>["ahead"][number];
export type QuarantineList = { quarantine: QuarantineRow[]; nextCursor: string | null };
