import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { shardCount, shardFor, shardIndex } from "../../src/claims/routing";
import { credit, deliverDemo, waitForStatus } from "../support/deliveries";
import { adminGet } from "./support";

type Storage = {
  d1Bytes: number | null;
  d1CapBytes: number;
  d1UsedFraction: number | null;
  shards: { shard: string; bytes: number }[] | null;
  shardBytesTotal: number | null;
};

describe("storage sizes", () => {
  it("the stats give D1's size, and each shard's size for one source; so does /admin/api/health", async () => {
    const eventKey = `msg_sizes_${crypto.randomUUID()}`;
    expect((await deliverDemo(eventKey, credit("acct_sizes", 1))).status).toBe(200);
    await waitForStatus("demo", eventKey);
    const owner = `demo#${shardIndex(eventKey, shardCount(env))}`;
    const ownerBytes = await shardFor(env, "demo", eventKey).storageBytes();
    expect(ownerBytes).toBeGreaterThan(0);

    const all = await (await adminGet("/admin/api/stats?window=1h")).json<{ storage: Storage }>();
    expect(all.storage.d1Bytes).toBeGreaterThan(0);
    expect(all.storage.d1UsedFraction).toBeCloseTo(all.storage.d1Bytes! / all.storage.d1CapBytes, 4);
    expect(all.storage.shards).toBeNull();

    const one = await (await adminGet("/admin/api/stats?source=demo&window=1h")).json<{ storage: Storage }>();
    expect(one.storage.shards).toHaveLength(shardCount(env));
    expect(one.storage.shards!.find((entry) => entry.shard === owner)!.bytes).toBe(ownerBytes);
    expect(one.storage.shardBytesTotal).toBe(one.storage.shards!.reduce((total, entry) => total + entry.bytes, 0));

    const health = await (await adminGet("/admin/api/health?source=demo")).json<{
      status: string;
      storage: Storage;
      systemAlerts: unknown[];
    }>();
    expect(["ok", "degraded"]).toContain(health.status);
    expect(Array.isArray(health.systemAlerts)).toBe(true);
    expect(health.storage.d1Bytes).toBeGreaterThan(0);
    expect(health.storage.shards!.find((entry) => entry.shard === owner)!.bytes).toBe(ownerBytes);
    expect(health.storage.shards).toHaveLength(shardCount(env));
  });
});
