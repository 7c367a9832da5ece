import { and, inArray, isNull } from "drizzle-orm";
import { isSameEvent } from "../claims/same-event";
import type { PendingClaim, PendingQuarantine, RelayReport } from "../claims/types";
import { database, type Database } from "../db/client";
import { quarantine, receipts } from "../db/schema";
import type { WorkMessage } from "./messages";

/**
 * Moves a shard's accepted claims into D1 and onto the work queue. Every step is safe to repeat: the insert is
 * ON CONFLICT DO NOTHING on (source, event_key), and a receipt is enqueued until D1 records that it was. A crash
 * anywhere here leaves the shard's copy in place, and the next alarm does the same work again.
 */
export async function relayToD1(
  env: Env,
  claims: readonly PendingClaim[],
  quarantines: readonly PendingQuarantine[],
): Promise<Omit<RelayReport, "remaining">> {
  if (claims.length === 0 && quarantines.length === 0) {
    return { receiptsRelayed: 0, quarantinesRelayed: 0, duplicatesCaughtByD1: 0 };
  }
  const db = database(env);
  const now = Date.now();
  const inserts = [
    ...claims.map((claim) =>
      db
        .insert(receipts)
        .values({
          receiptId: claim.receiptId,
          source: claim.source,
          eventKey: claim.eventKey,
          eventType: claim.eventType,
          subjectId: claim.subjectId,
          version: claim.version,
          occurredAt: claim.occurredAt,
          payloadSha256: claim.payloadSha256,
          body: claim.body ? Buffer.from(claim.body) : null,
          keptHeaders: claim.keptHeaders,
          receivedAt: claim.receivedAt,
          relayedAt: now,
          provenance: claim.provenance,
          status: "pending",
        })
        .onConflictDoNothing(),
    ),
    ...quarantines.map((record) =>
      db
        .insert(quarantine)
        .values({
          quarantineId: record.quarantineId,
          source: record.source,
          eventKey: record.eventKey,
          reason: "payload-mismatch",
          originalReceiptId: record.originalReceiptId,
          originalSha256: record.originalSha256,
          payloadSha256: record.payloadSha256,
          body: record.body ? Buffer.from(record.body) : null,
          keptHeaders: record.keptHeaders,
          receivedAt: record.receivedAt,
        })
        .onConflictDoNothing(),
    ),
  ];
  await db.batch(inserts as [(typeof inserts)[number], ...(typeof inserts)[number][]]);

  let duplicatesCaughtByD1 = 0;
  if (claims.length > 0) {
    const receiptIds = claims.map((claim) => claim.receiptId);
    const stored = await db
      .select({ receiptId: receipts.receiptId, enqueuedAt: receipts.enqueuedAt })
      .from(receipts)
      .where(inArray(receipts.receiptId, receiptIds));
    const storedIds = new Set(stored.map((row) => row.receiptId));
    // A claim whose id is not in D1 lost to an earlier receipt of the same key (another shard layout, or a key
    // the shard had already forgotten). Same bytes: a duplicate, dropped. Other bytes: quarantined, as the shard would.
    const lost = claims.filter((claim) => !storedIds.has(claim.receiptId));
    duplicatesCaughtByD1 = lost.length;
    if (lost.length > 0) await quarantineMismatches(db, lost);
    const toEnqueue = stored.filter((row) => row.enqueuedAt === null).map((row) => row.receiptId);
    if (toEnqueue.length > 0) {
      await enqueueReceipts(env, toEnqueue);
      await db
        .update(receipts)
        .set({ enqueuedAt: Date.now() })
        .where(and(inArray(receipts.receiptId, toEnqueue), isNull(receipts.enqueuedAt)));
    }
  }
  return { receiptsRelayed: claims.length, quarantinesRelayed: quarantines.length, duplicatesCaughtByD1 };
}

/**
 * Claims that D1 refused because their key already has a receipt: any whose bytes differ from that receipt's are
 * recorded in quarantine. The lost claim's own receipt id names the row, so a repeated relay inserts nothing new.
 */
async function quarantineMismatches(db: Database, lost: readonly PendingClaim[]): Promise<void> {
  const winners = await db
    .select({
      receiptId: receipts.receiptId,
      source: receipts.source,
      eventKey: receipts.eventKey,
      payloadSha256: receipts.payloadSha256,
      provenance: receipts.provenance,
    })
    .from(receipts)
    .where(inArray(receipts.eventKey, [...new Set(lost.map((claim) => claim.eventKey))]));
  const winnerOf = new Map(winners.map((row) => [`${row.source}\u0000${row.eventKey}`, row]));
  const mismatches = lost.flatMap((claim) => {
    const winner = winnerOf.get(`${claim.source}\u0000${claim.eventKey}`);
    if (!winner || isSameEvent(winner, claim)) return [];
    return [
      db
        .insert(quarantine)
        .values({
          quarantineId: claim.receiptId,
          source: claim.source,
          eventKey: claim.eventKey,
          reason: "payload-mismatch",
          originalReceiptId: winner.receiptId,
          originalSha256: winner.payloadSha256,
          payloadSha256: claim.payloadSha256,
          body: claim.body ? Buffer.from(claim.body) : null,
          keptHeaders: claim.keptHeaders,
          receivedAt: claim.receivedAt,
        })
        .onConflictDoNothing(),
    ];
  });
  if (mismatches.length > 0) await db.batch(mismatches as [(typeof mismatches)[number], ...(typeof mismatches)[number][]]);
}

const QUEUE_SEND_BATCH = 100;

/** The one way work reaches the queue: relay, replay and re-drive all call this. */
export async function enqueueReceipts(env: Pick<Env, "WORK_QUEUE">, receiptIds: readonly string[], delaySeconds = 0): Promise<void> {
  for (let start = 0; start < receiptIds.length; start += QUEUE_SEND_BATCH) {
    const messages = receiptIds
      .slice(start, start + QUEUE_SEND_BATCH)
      .map((receiptId) => ({ body: { receiptId } satisfies WorkMessage, contentType: "json" as const }));
    await env.WORK_QUEUE.sendBatch(messages, delaySeconds > 0 ? { delaySeconds } : undefined);
  }
}
