import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { RELAY_PROBE_MS, type ClaimShard } from "../../src/claims/shard";
import { difference, type MeterTotals } from "../../src/lib/meter";
import { eventually } from "../support/deliveries";
import { breakShardBindings, lossyQueue, relayFailures, unreachableD1 } from "../support/failpoints";

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

/** Unrelayed claims, read without the shard's meters so that polling does not count as the drain's work. */
function backlogOf(stub: DurableObjectStub<ClaimShard>): Promise<number> {
  return runInDurableObject(stub, (_instance, state) =>
    state.storage.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM event_claims WHERE relay_pending = 1").one().n,
  );
}

/**
 * `size` claims accepted through the shard's RPC while D1 is unreachable, the relay failing until its alarm has
 * backed off to the longest wait. Returns with D1 back (the queue drops messages: no consumer work in this test).
 */
async function backlogAfterOutage(stub: DurableObjectStub<ClaimShard>, source: string, size: number): Promise<void> {
  const restore = await breakShardBindings(stub, { DB: unreachableD1() });
  for (let start = 0; start < size; start += 250) {
    const answers = await Promise.all(
      Array.from({ length: Math.min(250, size - start) }, (_, index) => stub.claim(claimOf(source, `evt-${start + index}`))),
    );
    expect(answers.every((answer) => answer.disposition === "accepted")).toBe(true);
  }
  for (let tries = 0; tries < 20 && (await relayFailures(stub)) < 9; tries++) await runDurableObjectAlarm(stub);
  expect(await relayFailures(stub)).toBeGreaterThanOrEqual(9);
  expect(await backlogOf(stub)).toBe(size);
  await restore();
  await breakShardBindings(stub, { WORK_QUEUE: lossyQueue() });
}

/** Receipts per relay batch (one relayed_at per batch), in the order relayed. */
async function relayBatchSizes(source: string): Promise<number[]> {
  const { results } = await env.DB.prepare("SELECT COUNT(*) AS n FROM receipts WHERE source = ? GROUP BY relayed_at ORDER BY relayed_at")
    .bind(source)
    .all<{ n: number }>();
  return results.map((row) => row.n);
}

/**
 * Waits for the backlog to drain, returning the metered work over the drain. The meters are the isolate's, which
 * the queue consumer may share: only the shard's own SQLite rows (doRowsRead) are the drain's alone.
 */
async function drained(stub: DurableObjectStub<ClaimShard>, start: () => Promise<unknown>): Promise<MeterTotals> {
  const before = (await stub.meters()).totals;
  await start();
  await eventually(async () => ((await backlogOf(stub)) === 0 ? true : undefined), WELL_BEFORE_BACKOFF_MS, "the backlog drained");
  return difference((await stub.meters()).totals, before);
}

describe("recovery after a D1 outage", { timeout: 300_000 }, () => {
  it("drains 1,000 and 5,000 claims in work proportional to the backlog, resuming at once after a sweep or a claim", async () => {
    const smallSource = `outage-small-${crypto.randomUUID()}`;
    const small = standaloneShard(smallSource);
    await backlogAfterOutage(small, smallSource, 1_000);
    // A claim arriving once the probe interval has passed since the last failure brings the backed-off alarm forward.
    await new Promise((resolve) => setTimeout(resolve, RELAY_PROBE_MS + 500));
    const smallWork = await drained(small, () => small.claim(claimOf(smallSource, "evt-after-outage")));

    const largeSource = `outage-large-${crypto.randomUUID()}`;
    const large = standaloneShard(largeSource);
    await backlogAfterOutage(large, largeSource, 5_000);
    // The cron's sweep relays one batch; the shard then goes on at once instead of waiting out its backoff.
    const largeWork = await drained(large, () => large.sweep(0, 1, 0));
    expect(await relayFailures(large)).toBe(0);

    // Full batches: every relay batch but the last carries 50 claims.
    const smallBatches = await relayBatchSizes(smallSource);
    const largeBatches = await relayBatchSizes(largeSource);
    expect(smallBatches.length).toBeLessThanOrEqual(Math.ceil(1_000 / RELAY_BATCH) + 1);
    expect(largeBatches).toEqual(Array.from({ length: 5_000 / RELAY_BATCH }, () => RELAY_BATCH));
    // Linear: the shard's rows read per drained claim do not grow with the backlog.
    const smallPerClaim = smallWork.doRowsRead / 1_001;
    const largePerClaim = largeWork.doRowsRead / 5_000;
    console.info(
      `drain: 1,001 claims ${smallWork.doRowsRead} shard rows read in ${smallBatches.length} batches; ` +
        `5,000 claims ${largeWork.doRowsRead} shard rows read in ${largeBatches.length} batches`,
    );
    expect(largePerClaim).toBeLessThanOrEqual(smallPerClaim * 1.3);
    expect(largeWork.doRowsRead).toBeLessThanOrEqual(5 * smallWork.doRowsRead * 1.3);
  });
});
