import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { ulid } from "../../src/lib/ulid";
import { adminGet, seedReceipt, uniqueSource } from "./support";

const SOURCE = "reconcile-stuck";
const FURTHER_ROUTE = "second-destination";

type DeadDelivery = { receiptId: string; route: string };
type DeadAnswer = { deadDeliveries?: DeadDelivery[]; deadDeliveriesCursor?: string | null };

async function deadDelivery(receiptId: string, route: string) {
  await env.DB.prepare(
    "INSERT INTO deliveries (receipt_id, route, status, attempts, last_error) VALUES (?, ?, 'dead', 5, 'kept failing')",
  )
    .bind(receiptId, route)
    .run();
}

describe("GET /admin/api/dead", () => {
  it("lists a further route's dead delivery with its route, though the receipt's own delivery was processed", async () => {
    const receivedAt = Date.now();
    const receiptId = ulid(receivedAt);
    const eventKey = `msg_${crypto.randomUUID()}`;
    await env.DB.prepare(
      `INSERT INTO receipts (id, source, event_key, payload_sha256, received_at, relayed_at, status, attempts)
       VALUES (?, ?, ?, ?, ?, ?, 'processed', 1)`,
    )
      .bind(receiptId, SOURCE, eventKey, "0".repeat(64), receivedAt, receivedAt)
      .run();
    await deadDelivery(receiptId, FURTHER_ROUTE);

    const response = await adminGet(`/admin/api/dead?source=${SOURCE}`);
    expect(response.status).toBe(200);
    const listed = await response.json<{ deadDeliveries?: unknown[] }>();
    expect(listed.deadDeliveries).toContainEqual(
      expect.objectContaining({ receiptId, source: SOURCE, eventKey, route: FURTHER_ROUTE, lastError: "kept failing" }),
    );
    const otherSource = await (await adminGet("/admin/api/dead?source=reconcile-quiet")).json<{
      deadDeliveries?: { receiptId: string }[];
    }>();
    expect(otherSource.deadDeliveries?.map((row) => row.receiptId)).not.toContain(receiptId);
  });

  it("pages the dead further deliveries with a cursor, each once, by route and newest first", async () => {
    const source = uniqueSource("dead-paging");
    const now = Date.now();
    const expected: DeadDelivery[] = [];
    for (let index = 0; index < 5; index++) {
      const receiptId = await seedReceipt({ source, receivedAt: now - index * 1000, status: "processed" });
      for (const route of ["audit", "ledger"]) {
        await deadDelivery(receiptId, route);
        expected.push({ receiptId, route });
      }
    }
    // A limit of 4 over 10: pages of 4, 4 and 2, the last without a cursor.
    const seen: DeadDelivery[] = [];
    const pageSizes: number[] = [];
    let cursor: string | null = null;
    do {
      const path: string = `/admin/api/dead?source=${source}&limit=4${cursor ? `&deliveriesBefore=${cursor}` : ""}`;
      const response = await adminGet(path);
      expect(response.status).toBe(200);
      const answer: DeadAnswer = await response.json<DeadAnswer>();
      expect(answer.deadDeliveriesCursor).toBeDefined();
      pageSizes.push(answer.deadDeliveries?.length ?? 0);
      seen.push(...(answer.deadDeliveries ?? []).map(({ receiptId, route }) => ({ receiptId, route })));
      cursor = answer.deadDeliveriesCursor ?? null;
    } while (cursor !== null && pageSizes.length < 5);
    expect(pageSizes).toEqual([4, 4, 2]);
    const newestFirst = (a: DeadDelivery, b: DeadDelivery) =>
      a.route === b.route ? b.receiptId.localeCompare(a.receiptId) : b.route.localeCompare(a.route);
    expect(seen).toEqual([...expected].sort(newestFirst));
  });

  it("answers 400 for a cursor it did not hand out", async () => {
    const response = await adminGet("/admin/api/dead?deliveriesBefore=not-a-cursor");
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: { code: "invalid_query" } });
  });
});
