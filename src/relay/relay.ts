import { sql } from "drizzle-orm";
import { storeBodies } from "../bodies/segment-store";
import { BODY_LOCATION_R2, deleteStoredBodies } from "../bodies/stored-bodies";
import { batchEach, batchPreparedPerItem, perItem } from "../db/batch";
import { type Database, database } from "../db/client";
import { d1NowMs } from "../db/clock";
import { underIndexedKeys } from "../db/receipt-keys";
import { quarantine, receipts } from "../db/schema";
import { prepare } from "../db/statement-template";
import { meteredD1 } from "../lib/meter";
import type { PendingClaim, PendingQuarantine, RelayReport } from "../model/claims";
import { isSameEvent } from "../model/same-event";
import { databaseBindingIn, envForDatabase, receiptDatabaseBindingOf } from "../sources/databases";
import { bodySegmentsOf, orderingKeyOf } from "../sources/registry";
import { type RelayOutcome, rememberSize, roomIn } from "./database-room";
import { enqueueReceipts } from "./enqueue";
import { isShardArbitrated, receiptInsert } from "./receipt-insert";

/**
 * Moves a shard's accepted claims into D1 and onto the work queue: one D1 batch and one queue message per relay
 * batch. Every step is safe to repeat: the insert is keyed on (source, event_key), or on the receipt id alone where
 * the claim shard is the key's only arbiter (./receipt-insert.ts), and a claim whose receipt is already in D1 under
 * its own id comes back from the insert's RETURNING and is enqueued again (processing is idempotent). A crash anywhere here leaves the shard's copy in place, and the next alarm does the same work again.
 */
export async function relayToD1(
  env: Env,
  claims: readonly PendingClaim[],
  quarantines: readonly PendingQuarantine[],
  /** Bytes above which a source's bodies go to R2 (the shard passes each source's setting); none by default. */
  bodyThresholdOf: (source: string) => number = () => Number.POSITIVE_INFINITY,
  /**
   * The shard's relays have been failing (D1 or the queue down): each database is asked first with one cheap read,
   * so a relay tried while D1 is still out costs that failed read, not a segment written to R2 for a batch D1 then
   * refuses (./database-room.ts). The shard probes often while it fails, to resume soon after D1 comes back.
   */
  probing = false,
): Promise<RelayOutcome> {
  // Each source's receipts go to its own database (src/sources/databases.ts), a partitioned source's to the
  // ring's database for each receipt id (src/sources/partitions.ts). A shard holds one source, so this is one
  // group in practice, two when a partitioned source's batch spans a period boundary; each group is relayed in
  // its own D1 batch with its own queue message naming its database.
  const claimDatabase = new Map(
    claims.map((claim) => [claim, receiptDatabaseBindingOf(env, claim.source, claim.receiptId)]),
  );
  const quarantineDatabase = new Map(
    quarantines.map((record) => [record, receiptDatabaseBindingOf(env, record.source, record.quarantineId)]),
  );
  const bindings = new Set([...claimDatabase.values(), ...quarantineDatabase.values()]);
  const report: RelayOutcome = {
    receiptsRelayed: 0,
    quarantinesRelayed: 0,
    duplicatesCaughtByD1: 0,
    held: { receiptIds: new Set(), quarantineIds: new Set() },
    storeObservations: [],
  };
  for (const binding of bindings) {
    const claimsThere = claims.filter((claim) => claimDatabase.get(claim) === binding);
    const quarantinesThere = quarantines.filter((record) => quarantineDatabase.get(record) === binding);
    const databaseEnv = envForDatabase(env, binding);
    // A database at its size limit is not written: its claims stay in the shard, acknowledged and durable, and
    // go on a later relay once it has room.
    const room = await roomIn(databaseEnv, probing);
    report.storeObservations.push(...room.observations);
    if (room.verdict === "refuse") {
      for (const claim of claimsThere) report.held.receiptIds.add(claim.receiptId);
      for (const record of quarantinesThere) report.held.quarantineIds.add(record.quarantineId);
      continue;
    }
    const part = await relayToOneDatabase(databaseEnv, claimsThere, quarantinesThere, bodyThresholdOf);
    report.receiptsRelayed += part.receiptsRelayed;
    report.quarantinesRelayed += part.quarantinesRelayed;
    report.duplicatesCaughtByD1 += part.duplicatesCaughtByD1;
  }
  return report;
}

async function relayToOneDatabase(
  env: Env,
  claims: readonly PendingClaim[],
  quarantines: readonly PendingQuarantine[],
  bodyThresholdOf: (source: string) => number,
): Promise<Omit<RelayReport, "remaining" | "heldBack">> {
  if (claims.length === 0 && quarantines.length === 0) {
    return { receiptsRelayed: 0, quarantinesRelayed: 0, duplicatesCaughtByD1: 0 };
  }
  const db = database(env);
  const d1 = meteredD1(env.DB);
  const binding = databaseBindingIn(env);
  // Bodies go to R2 first (one segment for the batch, large ones on their own): the row then only says where the
  // body is (src/bodies/segment-store.ts).
  const bodyLocations = await storeBodies(env, claims, bodyThresholdOf, bodySegmentsOf(env), Date.now());
  const firstReceiptId = claims[0]?.receiptId;
  const relayed = await batchPreparedPerItem(d1, {
    receipts: perItem(claims, (claim) =>
      receiptInsert(claim.receiptId === firstReceiptId, isShardArbitrated(env, binding, claim))(d1, {
        receiptId: claim.receiptId,
        source: claim.source,
        eventKey: claim.eventKey,
        eventType: claim.eventType,
        subjectId: claim.subjectId,
        version: claim.version,
        occurredAt: claim.occurredAt,
        payloadSha256: claim.payloadSha256,
        body: claim.body && !bodyLocations.has(claim.receiptId) ? Buffer.from(claim.body) : null,
        bodyLocation: bodyLocations.get(claim.receiptId) ?? null,
        keptHeaders: claim.keptHeaders,
        receivedAt: claim.receivedAt,
        provenance: claim.provenance,
        orderingKey: orderingKeyOf(env, claim),
        firstReceiptId,
      }),
    ),
    // In the same batch only to share its one D1 call.
    quarantines: perItem(quarantines, (record) => prepare(d1, quarantineInsert(db, record))),
  });
  rememberSize(
    env,
    [...relayed.receipts, ...relayed.quarantines].map(({ result }) => result),
  );
  // The insert returns a claim's row (its `id` column) only when the row is the claim's own (a first or a
  // repeated relay).
  const stored = new Set(
    relayed.receipts
      .filter(({ item: claim, result }) => result.results.some((row) => row.id === claim.receiptId))
      .map(({ item: claim }) => claim.receiptId),
  );

  // A claim whose id is not in D1 lost to an earlier receipt of the same key (another shard layout, or a key the
  // shard had already forgotten). Same bytes: a duplicate, dropped. Other bytes: quarantined, as the shard would.
  const lost = claims.filter((claim) => !stored.has(claim.receiptId));
  if (lost.length > 0) await quarantineMismatches(db, lost);
  // A lost claim's large body went to R2 under a receipt id no row names (quarantine keeps its own copy in D1); its
  // bytes in the batch's segment are shared with the others and go with the segment.
  await deleteStoredBodies(
    env,
    lost.filter((claim) => bodyLocations.get(claim.receiptId) === BODY_LOCATION_R2).map((claim) => claim.receiptId),
  );
  // The message grants each receipt's first lease (src/consumers/lease/relay-grant.ts): a forward's first attempt
  // then writes no lease row. A repeated relay's message grants only what no attempt has touched yet.
  await enqueueReceipts(
    env,
    claims.filter((claim) => stored.has(claim.receiptId)),
    0,
    { relayGrant: true },
  );
  return { receiptsRelayed: claims.length, quarantinesRelayed: quarantines.length, duplicatesCaughtByD1: lost.length };
}

/**
 * Claims that D1 refused because their key already has a receipt: any whose bytes differ from that receipt's are
 * recorded in quarantine. The lost claim's own receipt id names the row, so a repeated relay inserts nothing new.
 */
async function quarantineMismatches(db: Database, lost: readonly PendingClaim[]): Promise<void> {
  const winners = (
    await Promise.all(
      [...new Set(lost.map((claim) => claim.source))].map((source) =>
        db
          .select({
            receiptId: receipts.receiptId,
            source: receipts.source,
            eventKey: receipts.eventKey,
            payloadSha256: receipts.payloadSha256,
            provenance: receipts.provenance,
          })
          .from(receipts)
          // By (source, event_key): the arbiter's own index, never a scan. Only a receipt in the index can have
          // beaten a claim to its key (a shard-arbitrated claim never loses), so its condition costs nothing.
          .where(
            underIndexedKeys(
              source,
              lost.filter((claim) => claim.source === source).map((claim) => claim.eventKey),
            ),
          ),
      ),
    )
  ).flat();
  const winnerOf = new Map(winners.map((row) => [`${row.source}\u0000${row.eventKey}`, row]));
  const mismatches = lost.flatMap((claim): PendingQuarantine[] => {
    const winner = winnerOf.get(`${claim.source}\u0000${claim.eventKey}`);
    if (!winner || isSameEvent(winner, claim)) return [];
    return [
      {
        quarantineId: claim.receiptId,
        source: claim.source,
        eventKey: claim.eventKey,
        originalReceiptId: winner.receiptId,
        originalSha256: winner.payloadSha256,
        payloadSha256: claim.payloadSha256,
        body: claim.body,
        keptHeaders: claim.keptHeaders,
        receivedAt: claim.receivedAt,
        copies: 1,
      },
    ];
  });
  await batchEach(db, mismatches, (record) => quarantineInsert(db, record));
}

function quarantineInsert(db: Database, record: PendingQuarantine) {
  return (
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
        // D1's clock, so quarantine paging catches up on rows relayed behind a reader (src/admin/receipts/quarantine-slice.ts).
        relayedAt: d1NowMs,
        copies: record.copies,
      })
      // A repeated relay of a row changes nothing; a key's counter relayed again with a higher count raises it, and
      // takes a new relayed_at so a reader paging the quarantine sees it again. Never lowered: relays may overlap.
      .onConflictDoUpdate({
        target: quarantine.quarantineId,
        set: { copies: sql`excluded.copies`, payloadSha256: sql`excluded.payload_sha256`, relayedAt: d1NowMs },
        setWhere: sql`excluded.copies > ${quarantine.copies}`,
      })
  );
}
