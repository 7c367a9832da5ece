import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { ulidTime } from "../../src/lib/ulid";
import { partitionDatabaseOf, receiptPartitionsOf } from "../../src/sources/partitions";
import { adminGet } from "../admin/support";
import { CRON_TEST_TIMEOUT_MS, cronRun, unique } from "../reconcile/support";
import { credit, eventually, post, signDemo } from "../support/deliveries";

/**
 * `keep`, the SQL window, shorter than the key window: the `partitioned-keys` source (test/fixtures/sources/
 * partitions.json) keeps its keys 10 days, the ring keeps a receipt in D1 2 days (vitest.config.ts). Once the
 * receipt's partition is archived and emptied, D1 holds nothing of it, and the claim shards alone still answer for
 * its key: a resend is a duplicate, other bytes under the key are quarantined, and nothing is admitted twice.
 */

const SOURCE = "partitioned-keys";
const PARTITIONS = ["DB_P0", "DB_P1", "DB_P2", "DB_P3"] as const;
const DAY_MS = 86_400_000;

type Answer = { status: string; receipt?: string };

async function send(eventKey: string, amount: number): Promise<Answer> {
  const body = JSON.stringify(credit(`acct_${eventKey}`, amount));
  const response = await post(`/webhooks/${SOURCE}`, body, signDemo(eventKey, body));
  expect(response.status).toBe(200);
  return response.json<Answer>();
}

/** Every row with `eventKey` in `table` of every receipt database. */
async function rowsOf(table: "receipts" | "quarantine", eventKey: string): Promise<{ id: string; status?: string }[]> {
  const rows: { id: string; status?: string }[] = [];
  for (const binding of ["DB", ...PARTITIONS] as const) {
    const { results } = await env[binding]
      .prepare(`SELECT * FROM ${table} WHERE source = ? AND event_key = ?`)
      .bind(SOURCE, eventKey)
      .all<{ id: string; status?: string }>();
    rows.push(...results);
  }
  return rows;
}

describe("the SQL window (keep) shorter than dedupe_retention", () => {
  it("answers duplicate, and quarantines other bytes, for a key whose receipt was archived and dropped", {
    timeout: CRON_TEST_TIMEOUT_MS,
  }, async () => {
    const eventKey = `msg_keep_${unique()}`;
    const first = await send(eventKey, 5);
    expect(first.status).toBe("accepted");
    const receiptId = first.receipt!;
    await eventually(
      async () => ((await rowsOf("receipts", eventKey))[0]?.status === "processed" ? true : undefined),
      20_000,
      `${receiptId} processed`,
    );
    const parsed = receiptPartitionsOf(env);
    if (!parsed.ok || !parsed.partitions) throw new Error("the test ring is not configured");
    const home = partitionDatabaseOf(parsed.partitions, receiptId);

    // Three days on, past keep (2d) and well inside dedupe_retention (10d), the cron readies the receipt's database
    // for the period that comes round to it next: archived to R2, then emptied.
    const later = Date.now() + 3 * DAY_MS;
    await env.DB.prepare("DELETE FROM checkpoints WHERE source = '*' AND reconciler = ?")
      .bind(`partition-ring:${home}`)
      .run();
    const run = await cronRun(later);
    expect(run.failures).toBeNull();
    expect(run.counts.partitions).toMatchObject({ databasesEmptied: 1 });
    expect(await rowsOf("receipts", eventKey)).toEqual([]);
    const archived = await env.BODIES.list({ prefix: `archive/${home}/` });
    const lines = await Promise.all(
      archived.objects.map(async (object) => (await (await env.BODIES.get(object.key))!.text()).split("\n")),
    );
    expect(lines.flat().filter((line) => line.includes(receiptId)).length).toBeGreaterThan(0);
    // Shown by id, it is archived, not unknown: the answer names the archive's objects.
    const shown = await adminGet(`/admin/api/receipts/${receiptId}`);
    expect(shown.status).toBe(404);
    const { error } = await shown.json<{ error: { code: string; message: string } }>();
    expect(error.code).toBe("receipt_archived");
    expect(error.message).toContain(
      `archive/${home}/${new Date(Math.floor(ulidTime(receiptId) / DAY_MS) * DAY_MS).toISOString()}/`,
    );

    // Shown by its event key, the same: its claim shard still names the receipt, and the receipt's archive.
    const byKey = await adminGet(`/admin/api/sources/${SOURCE}/events/${eventKey}`);
    expect(byKey.status).toBe(404);
    expect((await byKey.json<{ error: { code: string } }>()).error.code).toBe("receipt_archived");

    // D1 no longer holds the key; the claim shard does, for its whole dedupe_retention.
    expect(await send(eventKey, 5)).toEqual({ status: "duplicate", receipt: receiptId });
    const other = await send(eventKey, 6);
    expect(other.status).toBe("quarantined");
    // The quarantined copy is written by the same relay as any admission: once it is in D1, the relay has run past
    // both resends, and still no second receipt of the key is anywhere.
    await eventually(
      async () => ((await rowsOf("quarantine", eventKey)).length > 0 ? true : undefined),
      20_000,
      `the other bytes of ${eventKey} quarantined`,
    );
    expect(await rowsOf("receipts", eventKey)).toEqual([]);
  });
});
