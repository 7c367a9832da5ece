import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { shardFor } from "../../src/claims/routing";
import type { ClaimShard } from "../../src/claims/shard";
import { credit, deliverDemo } from "../support/deliveries";
import { everyClaim, settle, settleEachTest } from "../support/storage";

settleEachTest();

/** Once relayed, a shard keeps only what dedupe needs: no body, headers or event details linger in its storage. */
describe("what a shard keeps after relaying", () => {
  it("a claim becomes key, hash, receipt id, time and provenance; a quarantined copy keeps no body or headers", async () => {
    const eventKey = `msg_tombstone_${crypto.randomUUID()}`;
    expect((await deliverDemo(eventKey, credit("acct_tombstone", 1))).status).toBe(200);
    expect((await deliverDemo(eventKey, credit("acct_tombstone", 2))).status).toBe(200); // same key, other bytes
    await settle();

    const stored = await runInDurableObject(shardFor(env, "demo", eventKey), (_instance: ClaimShard, state) => ({
      claim: state.storage.sql
        .exec(
          `SELECT * FROM ${everyClaim(state.storage.sql)} WHERE relay_pending IN (0, 1) AND source = 'demo' AND event_key = ?`,
          eventKey,
        )
        .toArray(),
      outbox: state.storage.sql
        .exec("SELECT * FROM quarantine_outbox WHERE source = 'demo' AND event_key = ?", eventKey)
        .toArray(),
    }));
    expect(stored.claim).toHaveLength(1);
    const lingering = Object.entries(stored.claim[0]!)
      .filter(([, value]) => value !== null)
      .map(([column]) => column)
      .sort();
    expect(lingering).toEqual([
      "event_key",
      "payload_sha256",
      "provenance",
      "receipt_id",
      "received_at",
      "relay_pending",
      "source",
    ]);
    expect(stored.outbox).toHaveLength(1);
    expect(stored.outbox[0]).toMatchObject({ body: null, kept_headers: null });
    expect(stored.outbox[0]!.relayed_at).not.toBeNull();
  });
});
