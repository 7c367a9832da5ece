import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { app } from "../../src/app";
import { shardFor, shardIndex } from "../../src/claims/routing";
import { readCheckpoint } from "../../src/db/checkpoints";
import { ROLLOUT_GRACE_MS, SHARD_EPOCH_CHECKPOINT } from "../../src/reconcile/shard-epoch";
import { CRON_TEST_TIMEOUT_MS, runCron, runsAt } from "../reconcile/support";
import { credit, deliverDemo, eventually, signDemo, waitForStatus } from "../support/deliveries";
import { processedCount, quarantineFor, receiptsFor, settleEachTest } from "../support/storage";

/**
 * A shard epoch (src/claims/epoch-config.ts): CLAIM_SHARD_COUNT goes from 8 (the test deployment's) to 16 with
 * [vars.CLAIM_SHARD_PREVIOUS] declaring the 8 being left. Every delivery goes through the real route; the env
 * handed to app.fetch is the new deployment's, and the Durable Objects are the real ones.
 */

type Answer = { status: string; receipt: string };

settleEachTest();

let epochs = 0;
/**
 * The deployment after the change, deployed just now, with an epoch of its own per test (an epoch closed by one
 * test stays closed in the shards).
 */
function sixteenShards(sources: Record<string, unknown> = env.SOURCES as Record<string, unknown>): Env {
  const since = new Date(Date.now() - ++epochs * 1000).toISOString();
  return { ...env, SOURCES: sources, CLAIM_SHARD_COUNT: "16", CLAIM_SHARD_PREVIOUS: { shards: 8, since } } as Env;
}

/** An event key whose owner under 16 shards is another shard than under 8: the new owner has never seen it. */
function keyMovedTo16(prefix: string): string {
  for (let attempt = 0; ; attempt++) {
    const eventKey = `${prefix}_${Date.now()}_${attempt}`;
    if (shardIndex(eventKey, 8) !== shardIndex(eventKey, 16)) return eventKey;
  }
}

async function deliverUnder(deployment: Env, eventKey: string, payload: unknown): Promise<Answer> {
  const body = JSON.stringify(payload);
  const response = await app.fetch(
    new Request("https://receiver.test/webhooks/demo", { method: "POST", body, headers: signDemo(eventKey, body) }),
    deployment,
  );
  return response.json<Answer>();
}

/** What GET /admin/api/health says of the epoch under `deployment`. */
async function epochHealth(deployment: Env): Promise<unknown> {
  const response = await app.fetch(
    new Request("https://receiver.test/admin/api/health", { headers: { authorization: `Bearer ${env.ADMIN_TOKEN}` } }),
    deployment,
  );
  expect(response.status).toBe(200);
  return (await response.json<{ shardEpoch: unknown }>()).shardEpoch;
}

describe("a shard epoch: 8 shards to 16", () => {
  it("answers a delivery claimed under 8 shards as a duplicate under 16, and other bytes under its key as quarantined", async () => {
    const eventKey = keyMovedTo16("msg_epoch_dup");
    const first = await (await deliverDemo(eventKey, credit("acct_epoch_dup", 7))).json<Answer>();
    expect(first.status).toBe("accepted");
    await waitForStatus("demo", eventKey);

    const sixteen = sixteenShards();
    expect(await deliverUnder(sixteen, eventKey, credit("acct_epoch_dup", 7))).toEqual({
      status: "duplicate",
      receipt: first.receipt,
    });
    expect(await deliverUnder(sixteen, eventKey, credit("acct_epoch_dup", 700))).toMatchObject({
      status: "quarantined",
      receipt: first.receipt,
    });
    // The new owner answered: it learnt the key from its previous owner and keeps it (one consult, then its own).
    const newOwner = shardFor(sixteen, "demo", eventKey);
    expect((await newOwner.tombstone("demo", eventKey))?.receiptId).toBe(first.receipt);
    expect((await newOwner.epochStats()).consults).toBe(1);

    expect(await receiptsFor("demo", eventKey)).toEqual([expect.objectContaining({ receiptId: first.receipt })]);
    expect(await processedCount("demo", eventKey)).toBe(1);
    // The quarantined copy reaches D1 through the new owner's relay, against the first receipt.
    const quarantined = await eventually(async () => {
      const rows = await quarantineFor("demo", eventKey);
      return rows.length > 0 ? rows : undefined;
    });
    expect(quarantined).toEqual([expect.objectContaining({ originalReceiptId: first.receipt })]);
  });

  it("admits exactly one of concurrent copies of a new key, and none of an old one, while the epoch is open", async () => {
    const sixteen = sixteenShards();
    const oldKey = keyMovedTo16("msg_epoch_race_old");
    const first = await (await deliverDemo(oldKey, credit("acct_epoch_race", 3))).json<Answer>();
    expect(first.status).toBe("accepted");

    const [oldCopies, newCopies] = await Promise.all([
      Promise.all(Array.from({ length: 10 }, () => deliverUnder(sixteen, oldKey, credit("acct_epoch_race", 3)))),
      (async () => {
        const newKey = keyMovedTo16("msg_epoch_race_new");
        return Promise.all(Array.from({ length: 10 }, () => deliverUnder(sixteen, newKey, credit("acct_new", 4))));
      })(),
    ]);
    expect(oldCopies).toEqual(Array.from({ length: 10 }, () => ({ status: "duplicate", receipt: first.receipt })));
    expect(newCopies.filter((answer) => answer.status === "accepted")).toHaveLength(1);
    expect(newCopies.filter((answer) => answer.status === "duplicate")).toHaveLength(9);
    expect(new Set(newCopies.map((answer) => answer.receipt)).size).toBe(1);
    await waitForStatus("demo", oldKey);
    expect(await processedCount("demo", oldKey)).toBe(1);
  });

  it("hands the old shards' keys to their new owners in the cron, then closes the epoch: claims stop consulting", {
    timeout: CRON_TEST_TIMEOUT_MS,
  }, async () => {
    const demoOnly = { demo: (env.SOURCES as Record<string, unknown>).demo };
    const sixteen = sixteenShards(demoOnly);
    const eventKey = keyMovedTo16("msg_epoch_handover");
    const first = await (await deliverDemo(eventKey, credit("acct_epoch_handover", 5))).json<Answer>();
    expect(first.status).toBe("accepted");
    await waitForStatus("demo", eventKey);
    const newOwner = shardFor(sixteen, "demo", eventKey);
    expect(await newOwner.tombstone("demo", eventKey)).toBeNull();
    // While the epoch is open, a key its new owner has never seen costs one consult of its previous owner.
    const openKey = keyMovedTo16("msg_epoch_open");
    const openOwner = shardFor(sixteen, "demo", openKey);
    const openConsultsBefore = (await openOwner.epochStats()).consults;
    expect((await deliverUnder(sixteen, openKey, credit("acct_epoch_open", 1))).status).toBe("accepted");
    expect((await openOwner.epochStats()).consults).toBe(openConsultsBefore + 1);
    expect(await epochHealth(sixteen)).toMatchObject({ declared: true, removable: false });

    // The first run under the new config only notes the epoch: isolates may still run the old one for a while.
    const now = Date.now();
    await runCron(now, sixteen);
    expect((await runsAt(now)).at(-1)?.counts.shards).toMatchObject({ epochKeysHandedOver: 0, epochsClosed: 0 });
    expect(await newOwner.tombstone("demo", eventKey)).toBeNull();

    const later = now + ROLLOUT_GRACE_MS;
    await runCron(later, sixteen);
    const run = (await runsAt(later)).at(-1);
    expect(run?.failures).toBeNull();
    expect(run?.counts.shards).toMatchObject({ epochShardsPending: 0, epochsClosed: 1 });
    expect(run?.counts.shards.epochKeysHandedOver).toBeGreaterThanOrEqual(1);
    // Copied as a tombstone, not claimed again: the same receipt, nothing to relay.
    expect(await newOwner.tombstone("demo", eventKey)).toMatchObject({ receiptId: first.receipt, relayed: true });
    expect(await readCheckpoint(env, "*", SHARD_EPOCH_CHECKPOINT)).toMatchObject({ demo: { closed: true } });
    expect(await epochHealth(sixteen)).toMatchObject({
      removable: true,
      sources: { demo: { closed: true, previousShardsPending: 0 } },
    });

    // Closed: the copy answers from the new owner alone, and a new key's claim asks nobody.
    const consultsBefore = (await newOwner.epochStats()).consults;
    expect(await deliverUnder(sixteen, eventKey, credit("acct_epoch_handover", 5))).toEqual({
      status: "duplicate",
      receipt: first.receipt,
    });
    const freshKey = keyMovedTo16("msg_epoch_after");
    const freshOwner = shardFor(sixteen, "demo", freshKey);
    const freshConsultsBefore = (await freshOwner.epochStats()).consults;
    expect((await deliverUnder(sixteen, freshKey, credit("acct_epoch_after", 1))).status).toBe("accepted");
    expect((await newOwner.epochStats()).consults).toBe(consultsBefore);
    expect((await freshOwner.epochStats()).consults).toBe(freshConsultsBefore);
    expect(await processedCount("demo", eventKey)).toBe(1);
  });
});

/**
 * Local workerd does not implement `namespace.jurisdiction()`; this namespace gives a jurisdiction's objects ids of
 * their own (the name prefixed with it), as a real jurisdiction does, and hands back the real objects.
 */
function namespaceWithJurisdictions(real: Env["CLAIM_SHARDS"]): Env["CLAIM_SHARDS"] {
  return new Proxy(real, {
    get(target, property) {
      if (property === "jurisdiction")
        return (jurisdiction: string) =>
          new Proxy(target, {
            get(inner, innerProperty) {
              if (innerProperty === "idFromName") return (name: string) => inner.idFromName(`${jurisdiction}:${name}`);
              if (innerProperty === "get") return (objectId: DurableObjectId) => inner.get(objectId);
              return Reflect.get(inner, innerProperty);
            },
          });
      return Reflect.get(target, property);
    },
  });
}

describe("a shard epoch: a source moved into a jurisdiction", () => {
  it("answers a delivery claimed before the move as a duplicate from the source's new shards", async () => {
    const eventKey = `msg_epoch_moved_${Date.now()}`;
    const first = await (await deliverDemo(eventKey, credit("acct_epoch_moved", 2))).json<Answer>();
    expect(first.status).toBe("accepted");
    await waitForStatus("demo", eventKey);

    const sources = env.SOURCES as Record<string, Record<string, unknown>>;
    const since = new Date(Date.now() - ++epochs * 1000).toISOString();
    const moved = {
      ...env,
      CLAIM_SHARDS: namespaceWithJurisdictions(env.CLAIM_SHARDS),
      SOURCES: { ...sources, demo: { ...sources.demo, jurisdiction: "eu" } },
      CLAIM_SHARD_PREVIOUS: { since, jurisdictions: { demo: "" } },
    } as Env;
    const newOwner = shardFor(moved, "demo", eventKey);
    expect(await newOwner.tombstone("demo", eventKey)).toBeNull();
    expect(await deliverUnder(moved, eventKey, credit("acct_epoch_moved", 2))).toEqual({
      status: "duplicate",
      receipt: first.receipt,
    });
    expect((await newOwner.tombstone("demo", eventKey))?.receiptId).toBe(first.receipt);
  });
});
