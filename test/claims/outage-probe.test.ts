import { runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { ClaimShard } from "../../src/claims/shard";
import { breakShardBindings, relayFailures, unreachableD1 } from "../support/failpoints";
import { unrelayedClaims } from "../support/storage";

/**
 * While D1 is out a shard's relay is retried often (a claim probes at most once per RELAY_PROBE_MS), so that the
 * backlog starts draining as soon as D1 answers again. A retry must then cost only the failed D1 read: for a source
 * with `body_segments` the relay writes the batch's segment to R2 before the D1 insert (test/fixtures/sources/
 * segments.json), and a retry that did so while D1 still refused would pay an R2 write (Class A) per probe. Counted
 * with the shard's own meter, and the bucket's objects.
 */

const SOURCE = "segments-none";
const FAILED_RETRIES = 4;

function claimOf(eventKey: string) {
  return {
    source: SOURCE,
    eventKey,
    eventKeySigned: true,
    payloadSha256: `sha-${eventKey}`,
    eventType: "report.ready",
    subjectId: null,
    version: null,
    occurredAt: null,
    body: new TextEncoder().encode(JSON.stringify({ eventKey })),
    keptHeaders: "{}",
    receivedAt: Date.now(),
    provenance: "live" as const,
  };
}

async function r2Writes(stub: DurableObjectStub<ClaimShard>): Promise<number> {
  return (await stub.meters()).totals.r2ClassA;
}

async function segmentCount(): Promise<number> {
  return (await env.BODIES.list({ prefix: `segments/${SOURCE}/` })).objects.length;
}

describe("relay retries during a D1 outage", { timeout: 120_000 }, () => {
  it("ask D1 first once a relay has failed, so the retries pay no R2 write for their segment", async () => {
    const stub = env.CLAIM_SHARDS.get(env.CLAIM_SHARDS.idFromName(`outage-probe-${crypto.randomUUID()}`));
    // One relay that works first: the isolate then remembers the database's size, and a relay would not ask D1
    // before writing its segment.
    expect((await stub.claim(claimOf(`probe-${crypto.randomUUID()}`))).disposition).toBe("accepted");
    await stub.relay();
    expect(await unrelayedClaims(stub)).toBe(0);
    const segmentsBefore = await segmentCount();
    const writesBefore = await r2Writes(stub);

    const restore = await breakShardBindings(stub, { DB: unreachableD1() });
    expect((await stub.claim(claimOf(`probe-${crypto.randomUUID()}`))).disposition).toBe("accepted");
    for (let tries = 0; tries < 20 && (await relayFailures(stub)) < 1 + FAILED_RETRIES; tries++)
      await runDurableObjectAlarm(stub);
    expect(await relayFailures(stub)).toBeGreaterThanOrEqual(1 + FAILED_RETRIES);
    // The first failure was a relay like any other (its segment is written, then D1 refuses the rows); every retry
    // after it failed at D1's read, before R2.
    expect((await r2Writes(stub)) - writesBefore).toBe(1);
    expect(await unrelayedClaims(stub)).toBe(1);

    await restore();
    await runDurableObjectAlarm(stub);
    expect(await relayFailures(stub)).toBe(0);
    expect(await unrelayedClaims(stub)).toBe(0);
    // The batch's segment, written again under the same key by the relay that worked.
    expect((await r2Writes(stub)) - writesBefore).toBe(2);
    expect((await segmentCount()) - segmentsBefore).toBe(1);
  });
});
