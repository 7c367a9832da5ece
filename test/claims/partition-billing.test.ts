import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { ClaimShard } from "../../src/claims/shard";

/**
 * What the runtime's own meters count for the ways retention can forget rows: the numbers Cloudflare bills as rows
 * written (a Durable Object cursor's `rowsWritten`, D1's `meta.rows_written`). The published rule for DDL is only
 * that it "may contribute to a mix of read rows and write rows", to be tracked with these same counters; this holds
 * what they say, so a runtime that started counting a DROP TABLE per row would fail here, not silently in the bill.
 * The shard's time partitions (src/claims/partitions.ts) rest on it; docs/performance.md records it.
 */

const ROWS = 1_000;

const fill = (table: string) =>
  `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ${ROWS})
   INSERT INTO ${table} SELECT printf('%06d', i), 'k' || i, x'00' FROM n`;

describe("rows written when retention forgets rows, as the runtime meters them", () => {
  it("in a Durable Object: DELETE is one row per row, a DROP TABLE none however many it held", async () => {
    const stub = env.CLAIM_SHARDS.get(env.CLAIM_SHARDS.idFromName(`billing-${crypto.randomUUID()}`));
    const written = await runInDurableObject(stub, (_instance: ClaimShard, state) => {
      const sql = state.storage.sql;
      const rowsWritten = (query: string) => {
        const cursor = sql.exec(query);
        cursor.toArray();
        return cursor.rowsWritten;
      };
      const counts: Record<string, number> = {};
      for (const table of ["deleted", "emptied", "dropped", "nulled"]) {
        rowsWritten(`CREATE TABLE ${table} (id TEXT PRIMARY KEY, k TEXT, body BLOB) WITHOUT ROWID`);
        rowsWritten(`CREATE INDEX ${table}_k ON ${table} (k)`);
        counts[`fill ${table}`] = rowsWritten(fill(table));
      }
      counts.createTable = rowsWritten("CREATE TABLE created (id TEXT PRIMARY KEY) WITHOUT ROWID");
      counts.deleteEach = rowsWritten("DELETE FROM deleted WHERE id >= ''");
      counts.deleteAll = rowsWritten("DELETE FROM emptied");
      counts.dropTable = rowsWritten("DROP TABLE dropped");
      counts.nullUnindexedColumn = rowsWritten("UPDATE nulled SET body = NULL");
      return counts;
    });
    expect(written).toEqual({
      "fill deleted": 2 * ROWS,
      "fill emptied": 2 * ROWS,
      "fill dropped": 2 * ROWS,
      "fill nulled": 2 * ROWS,
      createTable: 2,
      deleteEach: ROWS,
      deleteAll: ROWS,
      dropTable: 0,
      nullUnindexedColumn: ROWS,
    });
  });

  it("in D1: the same, so a partition dropped there would write no row either", async () => {
    const table = `billing_${crypto.randomUUID().replaceAll("-", "")}`;
    const rowsWritten = async (query: string) => (await env.DB.prepare(query).run()).meta.rows_written;
    await rowsWritten(`CREATE TABLE ${table} (id TEXT PRIMARY KEY, k TEXT, body BLOB)`);
    await rowsWritten(`CREATE UNIQUE INDEX ${table}_k ON ${table} (k)`);
    expect(await rowsWritten(fill(table))).toBe(3 * ROWS);
    expect(await rowsWritten(`UPDATE ${table} SET body = NULL WHERE id < '000100'`)).toBe(100);
    expect(await rowsWritten(`DELETE FROM ${table} WHERE id < '000100'`)).toBe(100);
    expect(await rowsWritten(`DROP TABLE ${table}`)).toBe(0);
  });
});
