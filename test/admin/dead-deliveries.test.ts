import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { ulid } from "../../src/lib/ulid";
import { adminGet } from "./support";

const SOURCE = "reconcile-stuck";
const FURTHER_ROUTE = "second-destination";

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
    await env.DB.prepare(
      "INSERT INTO deliveries (receipt_id, route, status, attempts, last_error) VALUES (?, ?, 'dead', 5, 'kept failing')",
    )
      .bind(receiptId, FURTHER_ROUTE)
      .run();

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
});
