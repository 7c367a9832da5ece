import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { difference, meterReading } from "../../src/lib/meter";
import { ulid } from "../../src/lib/ulid";
import type { PendingClaim } from "../../src/model/claims";
import type { QueuedWork } from "../../src/model/work-message";
import { keysAlreadyStored } from "../../src/reconcile/catch-up/claim-missing";
import { relayToD1 } from "../../src/relay/relay";
import { partitionDatabaseOf, receiptPartitionsOf } from "../../src/sources/partitions";
import { adminGet } from "../admin/support";
import { unique } from "../reconcile/support";
import { creditClaimAt } from "../support/claims";
import { credit, eventually, post, signDemo } from "../support/deliveries";

/**
 * The claim shard as a partitioned source's only arbiter (migrations/0023, src/relay/receipt-insert.ts): its
 * receipts have no entry in D1's (source, event_key) index, so a relayed receipt writes one D1 row instead of two,
 * and what looks a receipt up by its key asks the shard, then reads it by id; nothing scans a ring database.
 */

const SOURCE = "partitioned";
const RING = ["DB_P0", "DB_P1", "DB_P2", "DB_P3"] as const;

function ringDatabaseOf(receiptId: string): D1Database {
  const parsed = receiptPartitionsOf(env);
  if (!parsed.ok || !parsed.partitions) throw new Error("the test ring is not configured");
  return (env as unknown as Record<string, D1Database>)[partitionDatabaseOf(parsed.partitions, receiptId)]!;
}

/** A queue that records the receipt ids it is sent and delivers nothing, so no consumer writes while D1 is metered. */
function recordingQueue(): { queue: Queue; sent: string[] } {
  const sent: string[] = [];
  const record = (body: QueuedWork) => {
    if ("receiptIds" in body) sent.push(...body.receiptIds);
  };
  const queue = {
    send: async (body: QueuedWork) => record(body),
    sendBatch: async (messages: Iterable<MessageSendRequest<QueuedWork>>) => {
      for (const { body } of messages) record(body);
    },
  } as unknown as Queue;
  return { queue, sent };
}

/** D1 rows the relay of `claims` writes, read from D1's own meta.rows_written (src/lib/meter.ts). */
async function relayedRowsWritten(claims: PendingClaim[], queue: Queue) {
  const before = meterReading();
  const report = await relayToD1({ ...env, WORK_QUEUE: queue }, claims, []);
  return { report, rowsWritten: difference(meterReading().totals, before.totals).d1RowsWritten };
}

/** Rows under `eventKey` in every receipt database, and how many of them the key index holds. */
async function rowsUnder(eventKey: string): Promise<{ receipts: number; indexed: number }> {
  let receipts = 0;
  let indexed = 0;
  for (const binding of ["DB", ...RING] as const) {
    const row = await env[binding]
      .prepare(
        `SELECT COUNT(*) AS receipts, (SELECT COUNT(*) FROM receipts INDEXED BY receipts_source_event_key
           WHERE source = ?1 AND event_key = ?2 AND shard_arbitrated IS NULL) AS indexed
         FROM receipts WHERE source = ?1 AND event_key = ?2`,
      )
      .bind(SOURCE, eventKey)
      .first<{ receipts: number; indexed: number }>();
    receipts += row!.receipts;
    indexed += row!.indexed;
  }
  return { receipts, indexed };
}

async function send(eventKey: string, amount: number): Promise<{ status: string; receipt?: string }> {
  const body = JSON.stringify(credit(`acct_${eventKey}`, amount));
  const response = await post(`/webhooks/${SOURCE}`, body, signDemo(eventKey, body));
  expect(response.status).toBe(200);
  return response.json();
}

async function relayed(eventKey: string): Promise<void> {
  await eventually(
    async () => ((await rowsUnder(eventKey)).receipts > 0 ? true : undefined),
    20_000,
    `${eventKey} relayed`,
  );
}

describe("the claim shard as a partitioned source's only arbiter", () => {
  it("relays a partitioned receipt as one D1 row (a one-database source's as two), and a repeated relay as nothing new, enqueued again", async () => {
    const token = unique();
    const now = Date.now();
    const partitioned = [0, 1, 2].map((index) => creditClaimAt(SOURCE, now, `msg_arb_${token}_${index}`));
    const first = recordingQueue();
    const once = await relayedRowsWritten(partitioned, first.queue);
    expect(once.rowsWritten).toBe(partitioned.length);
    expect(first.sent).toEqual(partitioned.map((claim) => claim.receiptId));

    const oneDatabase = [0, 1, 2].map((index) => creditClaimAt("demo", now, `msg_arb_demo_${token}_${index}`));
    expect((await relayedRowsWritten(oneDatabase, recordingQueue().queue)).rowsWritten).toBe(2 * oneDatabase.length);

    // The shard crashed before recording the relay: the same claims again. Their rows come back from the insert and
    // go on the queue again; no second receipt of any key, nothing counted as caught by D1.
    const again = recordingQueue();
    const twice = await relayedRowsWritten(partitioned, again.queue);
    expect(twice.report.duplicatesCaughtByD1).toBe(0);
    expect(again.sent).toEqual(partitioned.map((claim) => claim.receiptId));
    for (const claim of partitioned) expect(await rowsUnder(claim.eventKey)).toEqual({ receipts: 1, indexed: 0 });
  });

  it("still answers a resend duplicate and other bytes quarantined through the route, with no D1 key entry", async () => {
    const eventKey = `msg_arb_route_${unique()}`;
    const first = await send(eventKey, 5);
    expect(first.status).toBe("accepted");
    await relayed(eventKey);
    expect(await send(eventKey, 5)).toEqual({ status: "duplicate", receipt: first.receipt });
    expect((await send(eventKey, 6)).status).toBe("quarantined");
    expect(await rowsUnder(eventKey)).toEqual({ receipts: 1, indexed: 0 });
  });

  it("shows a partitioned receipt by its event key through its claim shard, and never scans a ring database for one", async () => {
    const eventKey = `msg_arb_show_${unique()}`;
    const { receipt: receiptId } = await send(eventKey, 3);
    await relayed(eventKey);
    const shown = await adminGet(`/admin/api/sources/${SOURCE}/events/${eventKey}`);
    expect(shown.status).toBe(200);
    expect((await shown.json<{ receipt: { receiptId: string } }>()).receipt.receiptId).toBe(receiptId);

    // A shard-arbitrated row its shard does not hold (as once the key is past dedupe_retention): only a scan of the
    // ring database would find it, so the answer says how to find it instead.
    const orphanKey = `msg_arb_orphan_${unique()}`;
    const orphanId = ulid(Date.now());
    await ringDatabaseOf(orphanId)
      .prepare(
        `INSERT INTO receipts (id, source, event_key, payload_sha256, received_at, relayed_at, status, shard_arbitrated)
         VALUES (?, ?, ?, ?, ?, ?, 'processed', 1)`,
      )
      .bind(orphanId, SOURCE, orphanKey, "0".repeat(64), Date.now(), Date.now())
      .run();
    const orphan = await adminGet(`/admin/api/sources/${SOURCE}/events/${orphanKey}`);
    expect(orphan.status).toBe(404);
    const { error } = await orphan.json<{ error: { code: string; message: string } }>();
    expect(error.code).toBe("event_not_found");
    expect(error.message).toContain("by its receipt id");
    expect(error.message).toContain("since and until");
    // By id it is there.
    expect((await adminGet(`/admin/api/receipts/${orphanId}`)).status).toBe(200);
  });

  it("tells the catch-up which keys a partitioned source holds: through its shards, and the ring's key index", async () => {
    const viaShard = `msg_arb_catch_${unique()}`;
    await send(viaShard, 1);
    await relayed(viaShard);
    // A receipt in a ring database's key index (from before migrations/0023, or held under its payload hash).
    const indexed = `msg_arb_indexed_${unique()}`;
    const indexedClaim = { ...creditClaimAt(SOURCE, Date.now(), indexed), claimKey: "f".repeat(64) };
    await relayToD1({ ...env, WORK_QUEUE: recordingQueue().queue }, [indexedClaim], []);
    expect(await rowsUnder(indexed)).toEqual({ receipts: 1, indexed: 1 });
    const never = `msg_arb_never_${unique()}`;
    expect(await keysAlreadyStored(env, SOURCE, [viaShard, indexed, never])).toEqual(new Set([viaShard, indexed]));
  });
});
