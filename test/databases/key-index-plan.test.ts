import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { receiptsMatching } from "../../src/admin/receipts/receipt-slice";
import { database } from "../../src/db/client";
import { underIndexedKeys } from "../../src/db/receipt-keys";
import { receipts } from "../../src/db/schema";

/**
 * Every lookup of receipts by (source, event_key) keeps using the arbiter's index now that it is partial
 * (migrations/0023): SQLite takes a partial index only for a query that names its condition, and without it a lookup
 * by key reads the whole table. The lookups' own builders, planned by D1: the admin's show by key and the relay's
 * and catch-up's key checks (underIndexedKeys), the receipts list's event-key filter on a database outside the ring.
 */

async function planOf(query: { toSQL(): { sql: string; params: unknown[] } }): Promise<string> {
  const { sql, params } = query.toSQL();
  const { results } = await env.DB.prepare(`EXPLAIN QUERY PLAN ${sql}`)
    .bind(...params)
    .all<{ detail: string }>();
  return results.map((row) => row.detail).join("\n");
}

const db = () => database(env);

describe("lookups by event key on the partial key index", () => {
  it("seeks receipts_source_event_key for a key lookup (show by key, the relay's and the catch-up's checks)", async () => {
    const plan = await planOf(
      db()
        .select({ receiptId: receipts.receiptId })
        .from(receipts)
        .where(underIndexedKeys("demo", ["msg_1", "msg_2"])),
    );
    expect(plan).toMatch(/USING (COVERING )?INDEX receipts_source_event_key \(source=\? AND event_key=\?\)/);
  });

  it("seeks it for the receipts list's event-key filter outside the ring", async () => {
    const plan = await planOf(
      db()
        .select({ receiptId: receipts.receiptId })
        .from(receipts)
        .where(receiptsMatching({ source: "demo", eventKey: "msg_1", limit: 50 }, true)),
    );
    expect(plan).toMatch(/USING (COVERING )?INDEX receipts_source_event_key \(source=\? AND event_key=\?\)/);
  });
});
