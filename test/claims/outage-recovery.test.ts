import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { RELAY_PROBE_MS } from "../../src/claims/relay-failures";
import type { ClaimShard } from "../../src/claims/shard";
import { difference, type MeterTotals } from "../../src/lib/meter";
import { type QueuedWork, receiptIdsOf } from "../../src/model/work-message";
import { eventually } from "../support/deliveries";
import { breakShardBindings, relayFailures, unreachableD1 } from "../support/failpoints";
import { unrelayedClaims } from "../support/storage";

/**
 * A D1 outage leaves each claim shard with a backlog of acknowledged claims and an alarm backed off to 5 minutes.
 * When D1 comes back the backlog must drain at full batch size in linear work, and start within seconds — by the
 * cron's sweep or by the next claim — not at the backed-off alarm.
 */

const RELAY_BATCH = 50;
/** The relay alarm's longest backoff is 5 minutes: a drain that finishes well inside this was brought forward. */
const WELL_BEFORE_BACKOFF_MS = 90_000;

function standaloneShard(name: string): DurableObjectStub<ClaimShard> {
  return env.CLAIM_SHARDS.get(env.CLAIM_SHARDS.idFromName(name));
}

function claimOf(source: string, eventKey: string) {
  return {
    source,
    eventKey,
    eventKeySigned: true,
    payloadSha256: `sha-${eventKey}`,
    eventType: "thing.happened",
    subjectId: null,
    version: null,
    occurredAt: null,
    body: new TextEncoder().encode(JSON.stringify({ eventKey, padding: "x".repeat(200) })),
    keptHeaders: "{}",
    receivedAt: Date.now(),
    provenance: "live" as const,
  };
}

/**
 * `size` claims accepted through the shard's RPC while D1 is unreachable, the relay failing until its alarm has
 * backed off to the longest wait. Returns with D1 back, and the receipts per relay batch as the batches go out: the
 * queue records each message's size and drops it (no consumer work in this test).
 */
async function backlogAfterOutage(
  stub: DurableObjectStub<ClaimShard>,
  source: string,
  size: number,
): Promise<number[]> {
  const restore = await breakShardBindings(stub, { DB: unreachableD1() });
  for (let start = 0; start < size; start += 250) {
    const answers = await Promise.all(
      Array.from({ length: Math.min(250, size - start) }, (_, index) =>
        stub.claim(claimOf(source, `evt-${start + index}`)),
      ),
    );
    expect(answers.every((answer) => answer.disposition === "accepted")).toBe(true);
  }
  for (let tries = 0; tries < 20 && (await relayFailures(stub)) < 9; tries++) await runDurableObjectAlarm(stub);
  expect(await relayFailures(stub)).toBeGreaterThanOrEqual(9);
  expect(await unrelayedClaims(stub)).toBe(size);
  await restore();
  const batchSizes: number[] = [];
  const recordingQueue = {
    send: async (body: QueuedWork) => void batchSizes.push(receiptIdsOf(body).length),
    sendBatch: async (messages: Iterable<MessageSendRequest<QueuedWork>>) => {
      for (const message of messages) batchSizes.push(receiptIdsOf(message.body).length);
    },
  } as unknown as Queue;
  await breakShardBindings(stub, { WORK_QUEUE: recordingQueue });
  return batchSizes;
}

/**
 * Starts the drain, then waits for the backlog to empty. Returns the metered work from the moment `start` returned
 * (so a trigger's own work, such as the sweep's capped counts, is left out) and the claims drained since. The meters
 * are the isolate's, which the queue consumer may share: only the shard's own SQLite rows (doRowsRead) are the
 * drain's alone, and here no consumer runs.
 */
async function drained(
  stub: DurableObjectStub<ClaimShard>,
  start: () => Promise<unknown>,
): Promise<{ work: MeterTotals; claims: number }> {
  await start();
  const before = (await stub.meters()).totals;
  const claims = await unrelayedClaims(stub);
  await eventually(
    async () => ((await unrelayedClaims(stub)) === 0 ? true : undefined),
    WELL_BEFORE_BACKOFF_MS,
    "the backlog drained",
  );
  return { work: difference((await stub.meters()).totals, before), claims };
}

/** Waits `ms` while keeping the object busy, so it is not evicted (which would hand it a fresh env and alarm state). */
async function waitAttended(stub: DurableObjectStub<ClaimShard>, ms: number): Promise<void> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    await unrelayedClaims(stub);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

describe("recovery after a D1 outage", { timeout: 300_000 }, () => {
  it("drains 1,000 and 5,000 claims in work proportional to the backlog, resuming at once after a sweep or a claim", async () => {
    const smallSource = `outage-small-${crypto.randomUUID()}`;
    const small = standaloneShard(smallSource);
    const smallBatches = await backlogAfterOutage(small, smallSource, 1_000);
    // A claim arriving once the probe interval has passed since the last failure brings the backed-off alarm forward.
    await waitAttended(small, RELAY_PROBE_MS + 500);
    const smallDrain = await drained(small, () => small.claim(claimOf(smallSource, "evt-after-outage")));

    const largeSource = `outage-large-${crypto.randomUUID()}`;
    const large = standaloneShard(largeSource);
    const largeBatches = await backlogAfterOutage(large, largeSource, 5_000);
    // The cron's sweep relays one batch; the shard then goes on at once instead of waiting out its backoff.
    const largeDrain = await drained(large, () => large.sweep(0, 1));
    expect(await relayFailures(large)).toBe(0);

    // Full batches: one queue message per relay batch, every one but the odd last carrying 50 claims.
    // The small shard's batches all went through the queue its live instance was given: the instance that had
    // backed off is the one that resumed (a fresh one would relay on its first claim anyway).
    expect(smallBatches.reduce((sum, size) => sum + size, 0)).toBe(1_001);
    expect(smallBatches.length).toBeLessThanOrEqual(Math.ceil(1_001 / RELAY_BATCH) + 1);
    expect(largeBatches).toEqual(Array.from({ length: 5_000 / RELAY_BATCH }, () => RELAY_BATCH));
    // Linear: the shard's rows read per drained claim do not grow with the backlog.
    const smallPerClaim = smallDrain.work.doRowsRead / smallDrain.claims;
    const largePerClaim = largeDrain.work.doRowsRead / largeDrain.claims;
    console.info(
      `drain: ${smallDrain.claims} claims ${smallDrain.work.doRowsRead} shard rows read; ` +
        `${largeDrain.claims} claims ${largeDrain.work.doRowsRead} shard rows read; batches ${smallBatches.length} and ${largeBatches.length}`,
    );
    expect(smallDrain.claims).toBeGreaterThan(900);
    expect(largeDrain.claims).toBeGreaterThan(4_900);
    expect(largePerClaim).toBeLessThanOrEqual(smallPerClaim * 1.3);
  });

  it("drains held quarantines without reading the relayed copies kept until retention", async () => {
    const source = `outage-quarantines-${crypto.randomUUID()}`;
    const stub = standaloneShard(source);
    const seedQuarantines = (tag: string, count: number, relayed: boolean) =>
      runInDurableObject(stub, (_instance, state) => {
        state.storage.sql.exec(
          `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?1)
           INSERT INTO quarantine_outbox (quarantine_id, source, event_key, original_receipt_id, original_sha256,
             payload_sha256, body, received_at, relayed_at)
           SELECT ?2 || '-' || i, ?3, ?2 || '-key-' || i, 'original-' || i, 'original-sha', 'changed-sha-' || i,
             CASE WHEN ?4 THEN NULL ELSE randomblob(100) END, ?5, CASE WHEN ?4 THEN ?5 END
           FROM n`,
          count,
          tag,
          source,
          relayed ? 1 : 0,
          Date.now(),
        );
      });
    // Relayed copies stay in the shard until dedupe retention; the held ones came in during an outage.
    await seedQuarantines("relayed", 3_000, true);
    await seedQuarantines("held", 500, false);
    const held = () =>
      runInDurableObject(
        stub,
        (_instance, state) =>
          state.storage.sql
            .exec<{ n: number }>("SELECT COUNT(*) AS n FROM quarantine_outbox WHERE relayed_at IS NULL")
            .one().n,
      );

    const before = (await stub.meters()).totals.doRowsRead;
    let batches = 0;
    while ((await held()) > 0 && batches < 20) {
      await stub.relay();
      batches++;
    }
    const rowsRead = (await stub.meters()).totals.doRowsRead - before;

    expect(await held()).toBe(0);
    expect(batches).toBe(500 / RELAY_BATCH);
    const stored = await env.DB.prepare("SELECT COUNT(*) AS n FROM quarantine WHERE source = ?")
      .bind(source)
      .first<{ n: number }>();
    expect(stored?.n).toBe(500);
    // Each batch reads its own rows and a capped count, never the 3,000 relayed copies.
    console.info(`quarantine drain: 500 held, 3,000 relayed copies: ${rowsRead} shard rows read in ${batches} batches`);
    expect(rowsRead / 500).toBeLessThanOrEqual(10);
  });
});
