import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { sourceSeries } from "../../src/admin/stats/series";
import { relayToD1 } from "../../src/relay/relay";
import { partitionDatabaseOf, receiptPartitionsOf } from "../../src/sources/partitions";
import { unique } from "../reconcile/support";
import { creditClaimAt } from "../support/claims";
import { adminGet } from "./support";

/**
 * A partitioned source's receipts are spread over the ring (test/fixtures/sources/partitions.json, DB_P0..DB_P3 one a
 * day): its stats are the sum over every database that holds them, not its home database's share.
 */

const SOURCE = "partitioned";
const HOUR_MS = 3_600_000;

interface Stats {
  sources: { source: string; received: number; pending: number }[];
}

describe("stats of a partitioned source", () => {
  it("sum the receipts of every ring database that holds them, in the API and the dashboard's series", async () => {
    const parsed = receiptPartitionsOf(env);
    if (!parsed.ok || !parsed.partitions) throw new Error("the test ring is not configured");
    const now = Date.now();
    // Two today, three a day earlier: two periods, so two ring databases.
    const token = unique();
    const times = [now - 60_000, now - 50_000, now - 25 * HOUR_MS, now - 25 * HOUR_MS + 1, now - 25 * HOUR_MS + 2];
    const claims = times.map((time, n) => creditClaimAt(SOURCE, time, `msg_stats_${token}_${n}`));
    const databases = new Set(claims.map((claim) => partitionDatabaseOf(parsed.partitions!, claim.receiptId)));
    expect(databases.size).toBe(2);
    // Relayed, not processed: the work messages go nowhere, so every receipt stays pending where it was written.
    const queue = { send: async () => {}, sendBatch: async () => {} } as unknown as Queue;
    const report = await relayToD1({ ...env, WORK_QUEUE: queue }, claims, []);
    expect(report.receiptsRelayed).toBe(claims.length);

    for (const path of [`/admin/api/stats?source=${SOURCE}&window=48h`, "/admin/api/stats?window=48h"]) {
      const response = await adminGet(path);
      expect(response.status).toBe(200);
      const stats = (await response.json<Stats>()).sources.find((entry) => entry.source === SOURCE);
      expect(stats, path).toMatchObject({ received: claims.length, pending: claims.length });
    }
    for (const onlySource of [SOURCE, undefined]) {
      const series = await sourceSeries(env, { now, hours: 48, onlySource });
      const received = (series.get(SOURCE) ?? []).reduce((total, point) => total + point.received, 0);
      expect(received).toBe(claims.length);
    }
  });
});
