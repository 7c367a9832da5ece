import { type Placeholder, sql } from "drizzle-orm";
import type { Database } from "../db/client";
import { relayBatchClock } from "../db/clock";
import { KEY_INDEXED, receipts } from "../db/schema";
import { statementTemplate } from "../db/statement-template";
import type { PendingClaim } from "../model/claims";
import { isPartitionDatabase } from "../sources/partitions";

/**
 * Whether a claim's receipt goes into D1 with the claim shard as its key's only arbiter (`shard_arbitrated = 1`,
 * migrations/0023): it is bound for one of the ring's databases, and its shard holds the event key itself. A
 * partitioned source's shard answers for its keys the whole key window, across shard-count changes (an epoch),
 * while D1 could only ever catch a repeat inside one ring database; so its unique entry is pure cost. A claim held
 * under its payload hash (a key the signature does not cover, src/model/claims.ts claimKeyOf) keeps the entry: the
 * shard is not its event key's arbiter, and the index still catches other bytes under that key in its database.
 */
export function isShardArbitrated(env: object, binding: string, claim: Pick<PendingClaim, "claimKey" | "eventKey">) {
  return claim.claimKey === claim.eventKey && isPartitionDatabase(env, binding);
}

/**
 * A claim's receipt insert, built by Drizzle once per isolate with a placeholder for every value and bound per
 * claim: building the same statement anew for each of a batch's 50 claims was the relay's largest CPU cost
 * (docs/performance.md, "What the figures decided"). The batch's first receipt takes D1's clock for
 * `relayed_at`, every other one copies it from that first row (src/db/clock.ts); a shard-arbitrated receipt
 * (isShardArbitrated) is keyed on its id alone, every other on the (source, event_key) index.
 */
export function receiptInsert(first: boolean, shardArbitrated: boolean) {
  return templates[`${first ? "first" : "later"}/${shardArbitrated ? "shard" : "index"}`];
}

const templates = {
  "first/index": statementTemplate((db) => receiptInsertQuery(db, null, false)),
  "later/index": statementTemplate((db) => receiptInsertQuery(db, sql.placeholder("firstReceiptId"), false)),
  "first/shard": statementTemplate((db) => receiptInsertQuery(db, null, true)),
  "later/shard": statementTemplate((db) => receiptInsertQuery(db, sql.placeholder("firstReceiptId"), true)),
};

function receiptInsertQuery(db: Database, firstReceiptId: Placeholder | null, shardArbitrated: boolean) {
  const value = (name: string) => sql.placeholder(name);
  return (
    db
      .insert(receipts)
      .values({
        receiptId: value("receiptId"),
        source: value("source"),
        eventKey: value("eventKey"),
        eventType: value("eventType"),
        subjectId: value("subjectId"),
        version: value("version"),
        occurredAt: value("occurredAt"),
        payloadSha256: value("payloadSha256"),
        body: value("body"),
        bodyLocation: value("bodyLocation"),
        keptHeaders: value("keptHeaders"),
        receivedAt: value("receivedAt"),
        // D1's clock, not the shard's: relayed_at then follows commit order, which paging relies on.
        relayedAt: relayBatchClock(firstReceiptId),
        provenance: value("provenance"),
        status: "pending",
        orderingKey: value("orderingKey"),
        shardArbitrated: shardArbitrated ? 1 : null,
      })
      // A second relay of the same claim (its shard crashed before recording the first) returns the row, so it
      // is enqueued again; a claim that lost the key to another receipt returns nothing. Only the repeat pays a
      // written row. A shard-arbitrated receipt has no entry in the key's index: only its own id can meet it. The
      // other's target names the partial index's condition, as SQLite requires to take it as the conflict target.
      .onConflictDoUpdate({
        ...(shardArbitrated
          ? { target: receipts.receiptId }
          : { target: [receipts.source, receipts.eventKey], targetWhere: KEY_INDEXED }),
        set: { relayedAt: sql`${receipts.relayedAt}` },
        setWhere: sql`${receipts.receiptId} = excluded.id`,
      })
      // Read raw (batchPreparedPerItem), so by the column's own name: `id`.
      .returning({ id: receipts.receiptId })
  );
}
