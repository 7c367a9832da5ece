import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { ClaimShard } from "../../src/claims/shard";

/**
 * Pruning walks a shard's tombstones in key order from a saved cursor, reading a bounded slice per call: every
 * expired key goes within a bounded number of calls, each call reads at most its limit (plus the keys it deletes),
 * and nothing unrelayed or inside its retention is touched.
 */

const DAY = 86_400_000;

function shard(name: string): DurableObjectStub<ClaimShard> {
  return env.CLAIM_SHARDS.get(env.CLAIM_SHARDS.idFromName(name));
}

/** `count` rows straight into the shard: tombstones (relayed) or unrelayed claims, received at `receivedAt`. */
async function seed(
  stub: DurableObjectStub<ClaimShard>,
  source: string,
  suffix: string,
  count: number,
  receivedAt: number,
  relayPending: 0 | 1,
) {
  await runInDurableObject(stub, (_instance, state) => {
    state.storage.sql.exec(
      `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?1)
       INSERT INTO event_claims (relay_pending, source, event_key, receipt_id, payload_sha256, received_at, provenance)
       SELECT ?2, ?3, printf('%05d', i) || ?4, 'r' || i, 'seeded', ?5, 'live' FROM n`,
      count,
      relayPending,
      source,
      suffix,
      receivedAt,
    );
  });
}

async function keys(stub: DurableObjectStub<ClaimShard>, where: string): Promise<number> {
  return runInDurableObject(
    stub,
    (_instance, state) =>
      state.storage.sql.exec<{ n: number }>(`SELECT COUNT(*) AS n FROM event_claims WHERE ${where}`).one().n,
  );
}

describe("pruning a shard's keys", () => {
  it("forgets every expired key within ⌈tombstones ÷ read limit⌉ + 1 calls, reading a bounded slice each time", async () => {
    const source = `prune-${crypto.randomUUID()}`;
    const stub = shard(source);
    const now = Date.now();
    const cutoff = now - 35 * DAY;
    // Expired and fresh keys interleaved in key order ("00042-old" next to "00042-new").
    await seed(stub, source, "-old", 1_800, now - 40 * DAY, 0);
    await seed(stub, source, "-new", 1_200, now - DAY, 0);
    await seed(stub, source, "-unrelayed", 30, now - 40 * DAY, 1);
    const tombstones = 3_000;
    const readLimit = 700;

    const perCall: { pruned: number; rowsRead: number }[] = [];
    for (let call = 0; call < 10 && (await keys(stub, `relay_pending = 0 AND received_at < ${cutoff}`)) > 0; call++) {
      const before = (await stub.meters()).totals.doRowsRead;
      const pruned = await stub.pruneKeys(cutoff, readLimit);
      perCall.push({ pruned, rowsRead: (await stub.meters()).totals.doRowsRead - before });
    }

    expect(perCall.length).toBeLessThanOrEqual(Math.ceil(tombstones / readLimit) + 1);
    expect(perCall.reduce((sum, call) => sum + call.pruned, 0)).toBe(1_800);
    expect(await keys(stub, `relay_pending = 0 AND received_at < ${cutoff}`)).toBe(0);
    // Untouched: keys inside their retention, and unrelayed claims however old (acknowledged work).
    expect(await keys(stub, "relay_pending = 0")).toBe(1_200);
    expect(await keys(stub, "relay_pending = 1")).toBe(30);
    // Rows read per call: the slice, one per key deleted, and a few for the cursor and the side tables.
    for (const call of perCall) expect(call.rowsRead).toBeLessThanOrEqual(readLimit + call.pruned + 10);

    // Caught up, a call after the cutoff has moved on finds the keys that have since expired, and only those. It
    // starts mid-table and wraps around: still every tombstone read once (1,200), plus one read per key deleted.
    const before = (await stub.meters()).totals.doRowsRead;
    expect(await stub.pruneKeys(now, readLimit * 10)).toBe(1_200);
    expect((await stub.meters()).totals.doRowsRead - before).toBeLessThanOrEqual(1_200 + 1_200 + 10);
    expect(await keys(stub, "relay_pending = 0")).toBe(0);
  });
});
