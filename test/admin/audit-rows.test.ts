import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { decodeBase64 } from "../../src/crypto/encoding";
import { database } from "../../src/db/client";
import { attempts, receipts } from "../../src/db/schema";
import { ulid } from "../../src/lib/ulid";
import { envForDatabase } from "../../src/sources/databases";
import { adminGet, uniqueSource } from "./support";

/**
 * GET /admin/api/audit/rows, what `npm run cli -- sql` copies: every receipt database's rows of one receipt table,
 * paged, each row once, restricted by source and by the receipt id's time, bodies only when asked for.
 */

type RowsPage = {
  table: string;
  columns: string[];
  base64Columns: string[];
  rows: unknown[][];
  nextCursor: string | null;
};

async function rowsPage(query: string): Promise<RowsPage> {
  const response = await adminGet(`/admin/api/audit/rows?${query}`);
  expect(response.status, await response.clone().text()).toBe(200);
  return response.json<RowsPage>();
}

/** Every row the walk answers, following nextCursor; each page within `limit`. */
async function allRows(query: string, limit: number): Promise<Omit<RowsPage, "table" | "nextCursor">> {
  const rows: unknown[][] = [];
  let page = await rowsPage(`${query}&limit=${limit}`);
  for (let pages = 0; ; pages++) {
    expect(page.rows.length).toBeLessThanOrEqual(limit);
    rows.push(...page.rows);
    if (page.nextCursor === null || pages > 50) break;
    page = await rowsPage(`${query}&limit=${limit}&after=${encodeURIComponent(page.nextCursor)}`);
  }
  expect(page.nextCursor).toBeNull();
  return { columns: page.columns, base64Columns: page.base64Columns, rows };
}

/** A receipt with one attempt, in the given database. */
async function seed(binding: "DB" | "DB_SECOND", source: string, receivedAt: number, body?: string): Promise<string> {
  const db = database(envForDatabase(env, binding));
  const receiptId = ulid(receivedAt);
  await db.insert(receipts).values({
    receiptId,
    source,
    eventKey: `evt_${receiptId}`,
    payloadSha256: "0".repeat(64),
    receivedAt,
    status: "dead",
    body: body === undefined ? null : Buffer.from(body),
  });
  await db.insert(attempts).values({ receiptId, attemptNumber: 1, startedAt: receivedAt + 10, outcome: "dead" });
  return receiptId;
}

const column = (page: { columns: string[]; rows: unknown[][] }, name: string) =>
  page.rows.map((row) => row[page.columns.indexOf(name)]);

describe("GET /admin/api/audit/rows", () => {
  it("walks every receipt database in pages, each row once, restricted to the source, children included", async () => {
    const source = uniqueSource("audit-rows");
    const t = Date.now() - 3_600_000;
    const seeded = [
      await seed("DB", source, t),
      await seed("DB_SECOND", source, t + 1000),
      await seed("DB", source, t + 2000),
      await seed("DB_SECOND", source, t + 3000),
      await seed("DB_SECOND", source, t + 4000),
    ];
    await seed("DB_SECOND", uniqueSource("audit-rows-other"), t + 5000);

    for (const limit of [1, 2, 3, 500]) {
      const page = await allRows(`table=receipts&source=${source}`, limit);
      expect(column(page, "id").sort()).toEqual([...seeded].sort());
      expect(page.columns).toContain("status");
      expect(page.columns).not.toContain("body");
    }
    const children = await allRows(`table=attempts&source=${source}`, 2);
    expect(column(children, "receipt_id").sort()).toEqual([...seeded].sort());
    expect(children.columns).toEqual([
      "receipt_id",
      "attempt_number",
      "started_at",
      "finished_at",
      "outcome",
      "http_status",
      "error",
      "duration_ms",
    ]);
  });

  it("selects by the receipt id's time, since inclusive and until exclusive, in both databases", async () => {
    const source = uniqueSource("audit-range");
    const t = Date.parse("2026-10-01T00:00:00Z");
    await seed("DB", source, t - 1);
    const first = await seed("DB_SECOND", source, t);
    const second = await seed("DB", source, t + 60_000);
    await seed("DB_SECOND", source, t + 120_000);
    const range = `since=${new Date(t).toISOString()}&until=${t + 120_000}`;
    for (const table of ["receipts", "attempts"]) {
      const page = await allRows(`table=${table}&source=${source}&${range}`, 1);
      expect(column(page, table === "receipts" ? "id" : "receipt_id").sort(), table).toEqual([first, second].sort());
    }
  });

  it("sends bodies only when asked for, as base64", async () => {
    const source = uniqueSource("audit-bodies");
    const receiptId = await seed("DB_SECOND", source, Date.now() - 1000, '{"amount": 12}');
    const without = await allRows(`table=receipts&source=${source}`, 10);
    expect(without.columns).not.toContain("body");
    expect(without.base64Columns).toEqual([]);
    const withBodies = await allRows(`table=receipts&source=${source}&bodies=true`, 10);
    expect(column(withBodies, "id")).toEqual([receiptId]);
    expect(withBodies.base64Columns).toEqual(["body"]);
    const [body] = column(withBodies, "body");
    expect(new TextDecoder().decode(decodeBase64(body as string)!)).toBe('{"amount": 12}');
  });

  it("refuses tables other than the receipt tables, bad cursors and limits, and callers without the token", async () => {
    for (const [query, code] of [
      ["table=handshake_secrets", "invalid_query"],
      ["table=alerts", "invalid_query"],
      ["", "invalid_query"],
      ["table=receipts&limit=1001", "invalid_query"],
      ["table=receipts&bodies=true&limit=51", "invalid_query"],
      ["table=receipts&bodies=yes", "invalid_query"],
      ["table=receipts&since=2026-11-02&until=2026-11-01", "invalid_query"],
      ["table=receipts&after=bm90LWEtY3Vyc29y", "invalid_cursor"],
      [`table=attempts&after=${btoa(JSON.stringify(["DB", ["only-one-key-column"]]))}`, "invalid_cursor"],
      [`table=receipts&after=${btoa(JSON.stringify(["DB_NOT_BOUND", null]))}`, "invalid_cursor"],
      ["table=receipts&tabel=receipts", "unknown_parameter"],
    ]) {
      const response = await adminGet(`/admin/api/audit/rows?${query}`);
      expect(response.status, query).toBe(400);
      expect((await response.json<{ error: { code: string } }>()).error.code, query).toBe(code);
    }
    expect((await adminGet("/admin/api/audit/rows?table=receipts", {})).status).toBe(401);
  });
});
