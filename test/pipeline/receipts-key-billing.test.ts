import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";

/**
 * Why the receipts table stays keyed by its id (docs/performance.md, "What the figures
 * decided"): the two layouts, side by side in D1, as the runtime meters them. Keyed by id (migrations/0002, WITHOUT
 * ROWID) with the UNIQUE (source, event_key) arbiter, an insert writes 2 rows. Keyed by (source, event_key), the
 * arbiter is the key and an insert writes 1 — but every by-id read (the consumer's load, lease and commit, replay,
 * the admin API) then scans the table unless id has an index of its own, and with it the insert writes 2 again.
 */

const ROWS = 200;

const fill = (table: string) =>
  `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ${ROWS})
   INSERT INTO ${table} (id, source, event_key, status) SELECT printf('r%06d', i), 'demo', 'msg_' || i, 'pending' FROM n`;

describe("the receipts' key, as D1 bills it", () => {
  it("keyed by (source, event_key), an insert saves the arbiter's row only while by-id reads scan the table", async () => {
    const run = async (query: string) => (await env.DB.prepare(query).run()).meta;
    const table = (name: string) => `${name}_${crypto.randomUUID().replaceAll("-", "")}`;
    const columns = "id TEXT NOT NULL, source TEXT NOT NULL, event_key TEXT NOT NULL, status TEXT NOT NULL";

    const byId = table("keyed_by_id");
    await run(`CREATE TABLE ${byId} (${columns}, PRIMARY KEY (id)) WITHOUT ROWID`);
    await run(`CREATE UNIQUE INDEX ${byId}_arbiter ON ${byId} (source, event_key)`);

    const byKey = table("keyed_by_event_key");
    await run(`CREATE TABLE ${byKey} (${columns}, PRIMARY KEY (source, event_key)) WITHOUT ROWID`);

    const byKeyWithId = table("keyed_by_event_key_id_indexed");
    await run(`CREATE TABLE ${byKeyWithId} (${columns}, PRIMARY KEY (source, event_key)) WITHOUT ROWID`);
    await run(`CREATE UNIQUE INDEX ${byKeyWithId}_id ON ${byKeyWithId} (id)`);

    const inserted = {
      byId: (await run(fill(byId))).rows_written / ROWS,
      byKey: (await run(fill(byKey))).rows_written / ROWS,
      byKeyWithId: (await run(fill(byKeyWithId))).rows_written / ROWS,
    };
    expect(inserted).toEqual({ byId: 2, byKey: 1, byKeyWithId: 2 });

    // The consumer's commit, by id: one row read with an index on id, the whole table without one.
    const commitById = (name: string) => run(`UPDATE ${name} SET status = 'processed' WHERE id = 'r000123'`);
    const committed = {
      byId: await commitById(byId),
      byKey: await commitById(byKey),
      byKeyWithId: await commitById(byKeyWithId),
    };
    expect(committed.byId.rows_written).toBe(1);
    expect(committed.byKeyWithId.rows_written).toBe(1);
    expect(committed.byId.rows_read).toBeLessThan(ROWS / 10);
    expect(committed.byKeyWithId.rows_read).toBeLessThan(ROWS / 10);
    expect(committed.byKey.rows_read).toBeGreaterThanOrEqual(ROWS);

    for (const name of [byId, byKey, byKeyWithId]) await run(`DROP TABLE ${name}`);
  });
});
