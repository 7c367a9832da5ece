import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { ClaimShard } from "../../src/claims/shard";
import type { ClaimRequest } from "../../src/model/claims";
import { everyClaim } from "../support/storage";

/**
 * A shard forgets expired tombstones a time partition at a time (src/claims/partitions.ts): a DROP TABLE, which the
 * runtime's meter counts as no row written however many tombstones it held, where deleting them cost one row each.
 * What must hold: a key is never forgotten before its dedupe retention, so a resend inside the window is always a
 * duplicate, whichever partition holds the key; unrelayed claims and the keys of unfinished receipts survive a drop.
 */

const DAY = 86_400_000;

function shard(): { stub: DurableObjectStub<ClaimShard>; source: string } {
  const source = `partitions-${crypto.randomUUID()}`;
  return { stub: env.CLAIM_SHARDS.get(env.CLAIM_SHARDS.idFromName(source)), source };
}

/** `count` rows straight into the shard's open partition: tombstones or unrelayed claims, received at `receivedAt`. */
async function seed(
  stub: DurableObjectStub<ClaimShard>,
  source: string,
  suffix: string,
  count: number,
  receivedAt: number,
  relayPending: 0 | 1,
) {
  await runInDurableObject(stub, (_instance, state) => {
    const open = state.storage.sql.exec<{ g: number }>("SELECT MAX(generation) AS g FROM claim_partitions").one().g;
    state.storage.sql.exec(
      `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?1)
       INSERT INTO ${open === 0 ? "event_claims" : `event_claims_${open}`} (relay_pending, source, event_key, receipt_id, payload_sha256, received_at, provenance)
       SELECT ?2, ?3, printf('%05d', i) || ?4, 'r' || i, 'seeded', ?5, 'live' FROM n`,
      count,
      relayPending,
      source,
      suffix,
      receivedAt,
    );
  });
}

async function held(
  stub: DurableObjectStub<ClaimShard>,
  where: string,
): Promise<{ claims: number; partitions: number }> {
  return runInDurableObject(stub, (_instance, state) => ({
    claims: state.storage.sql
      .exec<{ n: number }>(`SELECT COUNT(*) AS n FROM ${everyClaim(state.storage.sql)} WHERE ${where}`)
      .one().n,
    partitions: state.storage.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM claim_partitions").one().n,
  }));
}

function request(source: string, eventKey: string, receivedAt: number): ClaimRequest {
  return {
    source,
    eventKey,
    eventKeySigned: true,
    payloadSha256: `sha-${eventKey}`,
    eventType: null,
    subjectId: null,
    version: null,
    occurredAt: null,
    body: new TextEncoder().encode("{}"),
    keptHeaders: "{}",
    receivedAt,
    provenance: "live",
  };
}

async function spentRowsWritten(stub: DurableObjectStub<ClaimShard>, work: () => Promise<unknown>): Promise<number> {
  const before = (await stub.meters()).totals.doRowsWritten;
  await work();
  return (await stub.meters()).totals.doRowsWritten - before;
}

describe("a shard's time partitions", () => {
  it("drops a partition of 2,000 expired tombstones writing a handful of rows, keeping unrelayed claims and unfinished keys", async () => {
    const { stub, source } = shard();
    const now = Date.now();
    const cutoff = now - 35 * DAY;
    await seed(stub, source, "-old", 2_000, now - 40 * DAY, 0);
    await seed(stub, source, "-unrelayed", 30, now - 40 * DAY, 1);

    let forgotten = 0;
    const written = await spentRowsWritten(stub, async () => {
      forgotten = await stub.pruneKeys(cutoff, ["00007-old"]);
    });
    expect(forgotten).toBe(1_999);
    // The 30 unrelayed claims and the kept key moved to the new partition (1 row each), and the catalog and the new
    // table's few rows; the 1,999 tombstones dropped cost none (deleted one by one they were 1,999 rows).
    expect(written).toBeLessThanOrEqual(31 + 6);
    expect(await held(stub, "relay_pending = 1")).toEqual({ claims: 30, partitions: 1 });
    expect((await held(stub, "relay_pending = 0")).claims).toBe(1);
    const resend = await stub.claim({ ...request(source, "00007-old", now), payloadSha256: "seeded" });
    expect(resend.disposition).toBe("duplicate");
    // The carried claims are still relayable work: the relay finds them in their new partition.
    expect(await stub.unrelayedCount()).toBe(30);
  });

  it("never forgets a key inside its dedupe window: a resend is a duplicate across a partition change, until the partition's newest claim expires", async () => {
    const { stub, source } = shard();
    const now = Date.now();
    const window = 35 * DAY;
    expect((await stub.claim(request(source, "evt_old", now - 40 * DAY))).disposition).toBe("accepted");
    expect((await stub.claim(request(source, "evt_recent", now - DAY))).disposition).toBe("accepted");
    await stub.relay();

    // The cron's visit at `now`: the first partition closes (new claims go to a new one) but holds a claim received
    // inside the window, so it stays, and with it the 40-day-old key (forgotten between one and two windows).
    expect(await stub.pruneKeys(now - window)).toBe(0);
    expect(await held(stub, "1")).toEqual({ claims: 2, partitions: 2 });
    expect((await stub.claim(request(source, "evt_new", now))).disposition).toBe("accepted");
    expect((await stub.claim(request(source, "evt_recent", now))).disposition).toBe("duplicate");
    expect((await stub.claim(request(source, "evt_old", now))).disposition).toBe("duplicate");
    await stub.relay();
    expect(await stub.tombstone(source, "evt_new")).toMatchObject({ relayed: true, hasBody: false });

    // A window after `evt_recent` was received, its partition goes whole; `evt_new`, in the open one, stays.
    expect(await stub.pruneKeys(now - DAY + 1)).toBe(2);
    expect(await stub.tombstone(source, "evt_recent")).toBeNull();
    expect(await stub.tombstone(source, "evt_old")).toBeNull();
    expect((await stub.claim(request(source, "evt_new", now))).disposition).toBe("duplicate");
    expect((await stub.claim(request(source, "evt_recent", now))).disposition).toBe("accepted");
  });

  it("looks a key up in one statement of key seeks, whatever partition holds it", async () => {
    const { stub, source } = shard();
    const now = Date.now();
    await seed(stub, source, "-first", 500, now - DAY, 0);
    await stub.claim(request(source, "evt_a", now - DAY));
    await stub.relay();
    await stub.pruneKeys(now - 35 * DAY);
    await seed(stub, source, "-second", 500, now, 0);
    expect(await held(stub, "1")).toEqual({ claims: 1_001, partitions: 2 });
    const before = (await stub.meters()).totals;
    expect((await stub.claim(request(source, "evt_a", now))).disposition).toBe("duplicate");
    const between = (await stub.meters()).totals;
    expect((await stub.claim(request(source, "evt_b", now))).disposition).toBe("accepted");
    const after = (await stub.meters()).totals;
    // Two seeks per partition kept (relay_pending 0 and 1), the row found and the duplicate's hourly count: never a
    // scan of the 1,001 tombstones.
    expect(after.doRowsRead - before.doRowsRead).toBeLessThanOrEqual(2 * 2 * 2 + 4);
    // The new claim writes its one row, as with a single table (alarms apart).
    expect(after.doRowsWritten - after.doAlarmWrites - (between.doRowsWritten - between.doAlarmWrites)).toBe(1);
  });
});
