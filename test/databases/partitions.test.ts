import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { ulid } from "../../src/lib/ulid";
import type { QueuedWork } from "../../src/model/work-message";
import { relayToD1 } from "../../src/relay/relay";
import { partitionDatabaseOf, type ReceiptPartitions, receiptPartitionsOf } from "../../src/sources/partitions";
import { adminGet, adminPost } from "../admin/support";
import { unique } from "../reconcile/support";
import { creditClaimAt } from "../support/claims";
import { credit, eventually, post, signDemo } from "../support/deliveries";

/**
 * Receipts in time partitions: the `partitioned` source (test/fixtures/sources/partitions.json) says
 * `database = "partitions"`, and the ring is DB_P0..DB_P3, one a day (vitest.config.ts). A receipt's database is
 * the ring's for its id: the whole pipeline reads and writes it there.
 */

const SOURCE = "partitioned";
const PARTITIONS = ["DB_P0", "DB_P1", "DB_P2", "DB_P3"] as const;
type Partition = (typeof PARTITIONS)[number];
const DAY_MS = 86_400_000;

function ring(): ReceiptPartitions {
  const parsed = receiptPartitionsOf(env);
  if (!parsed.ok || !parsed.partitions) throw new Error("the test ring is not configured");
  return parsed.partitions;
}

async function statusIn(binding: string, receiptId: string): Promise<string | undefined> {
  const d1 = (env as unknown as Record<string, D1Database>)[binding]!;
  return (await d1.prepare("SELECT status FROM receipts WHERE id = ?").bind(receiptId).first<{ status: string }>())
    ?.status;
}

/** Every receipt database that holds `receiptId`. */
async function holdersOf(receiptId: string): Promise<string[]> {
  const holders: string[] = [];
  for (const binding of ["DB", "DB_SECOND", ...PARTITIONS])
    if (await statusIn(binding, receiptId)) holders.push(binding);
  return holders;
}

async function deliver(eventKey: string): Promise<string> {
  const body = JSON.stringify(credit(`acct_${eventKey}`, 1));
  const response = await post(`/webhooks/${SOURCE}`, body, signDemo(eventKey, body));
  expect(response.status).toBe(200);
  const found = await eventually(
    async () => {
      for (const binding of PARTITIONS) {
        const row = await env[binding]
          .prepare("SELECT id FROM receipts WHERE source = ? AND event_key = ?")
          .bind(SOURCE, eventKey)
          .first<{ id: string }>();
        if (row) return row.id;
      }
      return undefined;
    },
    20_000,
    `${eventKey} relayed into a partition`,
  );
  return found;
}

describe("receipts in time partitions", () => {
  it("puts a receipt in the ring's database for the period its id was minted in", () => {
    const partitions = ring();
    const dayStart = 20_000 * DAY_MS; // day 20,000 since the epoch: 20,000 mod 4 = 0
    expect(partitionDatabaseOf(partitions, ulid(dayStart))).toBe("DB_P0");
    expect(partitionDatabaseOf(partitions, ulid(dayStart + DAY_MS - 1))).toBe("DB_P0");
    expect(partitionDatabaseOf(partitions, ulid(dayStart + DAY_MS))).toBe("DB_P1");
    expect(partitionDatabaseOf(partitions, ulid(dayStart + 3 * DAY_MS))).toBe("DB_P3");
    // Round the ring: day 4 writes where day 0 did.
    expect(partitionDatabaseOf(partitions, ulid(dayStart + 4 * DAY_MS + 5))).toBe("DB_P0");
  });

  it("spreads one period's receipts over `spread` databases by a stable hash of the id", () => {
    const spread: ReceiptPartitions = { databases: ["A0", "A1", "B0", "B1"], periodMs: DAY_MS, spread: 2, periods: 2 };
    const ids = Array.from({ length: 64 }, (_, index) => ulid(20_001 * DAY_MS + index));
    const chosen = ids.map((receiptId) => partitionDatabaseOf(spread, receiptId));
    // Day 20,001 is odd: the second period's pair, both used, each id always to the same one.
    expect(new Set(chosen)).toEqual(new Set(["B0", "B1"]));
    expect(ids.map((receiptId) => partitionDatabaseOf(spread, receiptId))).toEqual(chosen);
  });

  it("runs the whole pipeline for a partitioned source in the receipt's partition: relay, consume, show, list, replay", async () => {
    const eventKey = `msg_part_${unique()}`;
    const receiptId = await deliver(eventKey);
    const home = partitionDatabaseOf(ring(), receiptId) as Partition;
    await eventually(
      async () => ((await statusIn(home, receiptId)) === "processed" ? true : undefined),
      20_000,
      `${receiptId} processed in ${home}`,
    );
    expect(await holdersOf(receiptId)).toEqual([home]);
    const shown = await adminGet(`/admin/api/receipts/${receiptId}`);
    expect(shown.status).toBe(200);
    expect(((await shown.json()) as { receipt: { status: string } }).receipt.status).toBe("processed");
    const byKey = await adminGet(`/admin/api/sources/${SOURCE}/events/${eventKey}`);
    expect(((await byKey.json()) as { receipt: { receiptId: string } }).receipt.receiptId).toBe(receiptId);
    const listed = await (await adminGet(`/admin/api/receipts?source=${SOURCE}&limit=100`)).json<{
      receipts: { receiptId: string }[];
    }>();
    expect(listed.receipts.map((receipt) => receipt.receiptId)).toContain(receiptId);

    const replayed = await adminPost(`/admin/api/receipts/${receiptId}/replay`, {});
    expect(replayed.status).toBe(202);
    await eventually(
      async () => {
        const row = await env[home]
          .prepare("SELECT COUNT(*) AS count FROM replays WHERE receipt_id = ?")
          .bind(receiptId)
          .first<{ count: number }>();
        return row!.count === 1 && (await statusIn(home, receiptId)) === "processed" ? true : undefined;
      },
      20_000,
      `${receiptId} replayed in ${home}`,
    );
    const replays = await env[home]
      .prepare("SELECT requested_by AS requestedBy FROM replays WHERE receipt_id = ?")
      .bind(receiptId)
      .all<{ requestedBy: string }>();
    expect(replays.results).toEqual([{ requestedBy: "api" }]);
    expect(await holdersOf(receiptId)).toEqual([home]);
  });

  it("splits a relay batch that spans a period boundary: one D1 batch and one queue message per database", async () => {
    // Two days ago and yesterday, so the claims are in two of the ring's databases and within retention.
    const boundary = (Math.floor(Date.now() / DAY_MS) - 1) * DAY_MS;
    const token = unique();
    const claims = [
      creditClaimAt(SOURCE, boundary - 2, `msg_edge_${token}_a`),
      creditClaimAt(SOURCE, boundary - 1, `msg_edge_${token}_b`),
      creditClaimAt(SOURCE, boundary, `msg_edge_${token}_c`),
    ];
    const sent: { database: string; receiptIds: string[] }[] = [];
    const queue = {
      send: async (body: QueuedWork) => {
        if ("database" in body) sent.push({ database: body.database, receiptIds: body.receiptIds });
        await env.WORK_QUEUE.send(body);
      },
      sendBatch: async (messages: Iterable<MessageSendRequest<QueuedWork>>) => {
        for (const { body } of messages)
          if ("database" in body) sent.push({ database: body.database, receiptIds: body.receiptIds });
        await env.WORK_QUEUE.sendBatch(messages);
      },
    } as unknown as Queue;
    const report = await relayToD1({ ...env, WORK_QUEUE: queue }, claims, []);
    expect(report.receiptsRelayed).toBe(3);

    const before = partitionDatabaseOf(ring(), claims[0]!.receiptId);
    const after = partitionDatabaseOf(ring(), claims[2]!.receiptId);
    expect(before).not.toBe(after);
    expect(sent).toEqual([
      { database: before, receiptIds: [claims[0]!.receiptId, claims[1]!.receiptId] },
      { database: after, receiptIds: [claims[2]!.receiptId] },
    ]);
    for (const claim of claims) {
      const home = partitionDatabaseOf(ring(), claim.receiptId);
      await eventually(
        async () => ((await statusIn(home, claim.receiptId)) === "processed" ? true : undefined),
        20_000,
        `${claim.receiptId} processed in ${home}`,
      );
      expect(await holdersOf(claim.receiptId)).toEqual([home]);
    }
    // Each half shares its D1 batch's one relayed_at; the two halves were two batches.
    const relayedAt = async (binding: string, receiptId: string) =>
      (
        await (env as unknown as Record<string, D1Database>)
          [binding]!.prepare("SELECT relayed_at AS relayedAt FROM receipts WHERE id = ?")
          .bind(receiptId)
          .first<{ relayedAt: number }>()
      )?.relayedAt;
    expect(await relayedAt(before, claims[0]!.receiptId)).toBe(await relayedAt(before, claims[1]!.receiptId));
  });

  it("keeps a receipt from before the switch to partitions readable where it is", async () => {
    // What `partitioned` left in DB while it was a one-database source: the admin surface still shows it.
    const receiptId = ulid(Date.now() - 60_000);
    const eventKey = `msg_before_${unique()}`;
    await env.DB.prepare(
      `INSERT INTO receipts (id, source, event_key, event_type, payload_sha256, body, received_at, relayed_at, status, attempts, lease_generation)
       VALUES (?, ?, ?, 'account.credited', ?, NULL, ?, ?, 'processed', 1, 1)`,
    )
      .bind(receiptId, SOURCE, eventKey, "0".repeat(64), Date.now() - 60_000, Date.now() - 60_000)
      .run();
    const shown = await adminGet(`/admin/api/receipts/${receiptId}`);
    expect(shown.status).toBe(200);
    expect(((await shown.json()) as { receipt: { receiptId: string } }).receipt.receiptId).toBe(receiptId);
    const byKey = await adminGet(`/admin/api/sources/${SOURCE}/events/${eventKey}`);
    expect(byKey.status).toBe(200);
    const listed = await (await adminGet(`/admin/api/receipts?source=${SOURCE}&limit=100`)).json<{
      receipts: { receiptId: string }[];
    }>();
    expect(listed.receipts.map((receipt) => receipt.receiptId)).toContain(receiptId);
  });
});
