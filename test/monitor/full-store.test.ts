import { runDurableObjectAlarm } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { shardFor } from "../../src/claims/routing";
import { cronObservations } from "../../src/monitor/conditions";
import { systemMonitor } from "../../src/monitor/report";
import { databaseLimit, databaseStoreObservations, storeVerdict } from "../../src/monitor/store-limits";
import { standInRequests } from "../reconcile/support";
import { credit, deliverDemo, eventually, waitForStatus } from "../support/deliveries";
import { breakShardBindings, countingQueue } from "../support/failpoints";

/**
 * A store near its limit is an alert, not a silent stall (docs/operating.md, "When a store fills up"). A receipt
 * database at its limit (D1_SIZE_LIMIT_BYTES, injected small into one claim shard) is not written: the relay leaves
 * the claims in the shard, raises "d1-full", and relays every one of them, once, when the limit is raised. A claim
 * shard at its limit (SHARD_SIZE_LIMIT_BYTES) answers a new key 503 and a known key as a duplicate.
 */

async function health(): Promise<{ status: string; reasons?: string[] }> {
  return (await exports.default.fetch(new Request("https://receiver.test/health"))).json();
}

async function openAlert(kind: string) {
  return (await systemMonitor(env).list()).find((alert) => alert.kind === kind && alert.state === "open");
}

async function noticesFor(alertId: string): Promise<string[]> {
  const signer = new Webhook(env.GATEWAY_SIGNING_SECRET);
  return (await standInRequests("alerts"))
    .filter((request) => request.headers["webhook-id"]?.startsWith(`${alertId}.`))
    .map((request) => (signer.verify(request.body, request.headers) as { type: string }).type);
}

/** `count` fresh demo event keys that all belong to one claim shard, so one injected limit governs them all. */
function keysOfOneShard(prefix: string, count: number): string[] {
  const first = `${prefix}_${crypto.randomUUID()}`;
  const shardName = shardFor(env, "demo", first).id.toString();
  const keys = [first];
  while (keys.length < count) {
    const key = `${prefix}_${crypto.randomUUID()}`;
    if (shardFor(env, "demo", key).id.toString() === shardName) keys.push(key);
  }
  return keys;
}

async function databaseSize(): Promise<number> {
  const size = (await env.DB.prepare("SELECT 1").run()).meta.size_after;
  if (typeof size !== "number") throw new Error("the local D1 did not report size_after");
  return size;
}

async function receiptsOf(eventKeys: readonly string[]): Promise<Map<string, number>> {
  const { results } = await env.DB.prepare(
    `SELECT event_key AS eventKey, COUNT(*) AS copies FROM receipts
     WHERE source = 'demo' AND event_key IN (SELECT value FROM json_each(?)) GROUP BY event_key`,
  )
    .bind(JSON.stringify(eventKeys))
    .all<{ eventKey: string; copies: number }>();
  return new Map(results.map((row) => [row.eventKey, row.copies]));
}

/** A credit with a 16 KB note: a few of them fill the injected room in a few relays. */
const padded = (account: string) => ({ ...credit(account, 1), note: "x".repeat(16 * 1024) });

describe("a receipt database at its size limit", () => {
  it("holds the claims in the shard, raises d1-full, and relays every one once when the limit is raised", {
    timeout: 120_000,
  }, async () => {
    // The size the relay weighs is D1's own `size_after` (the local D1 refuses PRAGMA page_count: SQLITE_AUTH).
    const before = await databaseSize();

    const keys = keysOfOneShard("msg_full_db", 40);
    const shard = shardFor(env, "demo", keys[0]!);
    const sent: string[] = [];
    // Room for a few padded receipts above what the database holds now, so the warning fires at once (80 %).
    await breakShardBindings(shard, (current) => ({
      D1_SIZE_LIMIT_BYTES: String(before + 96 * 1024),
      WORK_QUEUE: countingQueue(current.WORK_QUEUE, sent),
    }));

    // Through the real route until the relay meets the limit: each delivery acknowledged, then relayed at once.
    const delivered: string[] = [];
    let firstHeld: string | undefined;
    for (const key of keys) {
      expect((await deliverDemo(key, padded(`acct_${key}`))).status).toBe(200);
      delivered.push(key);
      await shard.relay();
      if (!(await shard.tombstone("demo", key))!.relayed) {
        firstHeld = key;
        break;
      }
    }
    expect(firstHeld, "the relay never met the injected limit").toBeDefined();
    expect(delivered.length).toBeGreaterThan(1);
    // Acknowledgements go on while the database is full: these wait in the shard too.
    const afterFull = keys.slice(delivered.length, delivered.length + 3);
    for (const key of afterFull) expect((await deliverDemo(key, padded(`acct_${key}`))).status).toBe(200);
    delivered.push(...afterFull);
    // A relay while the database is still full writes nothing and holds its batch back.
    const report = await shard.relay();
    expect(report.heldBack).toBeGreaterThan(0);
    expect(report.receiptsRelayed).toBe(0);

    const waiting = [firstHeld!, ...afterFull];
    expect([...(await receiptsOf(waiting)).keys()]).toEqual([]);
    for (const key of waiting) expect((await shard.tombstone("demo", key))!.relayed).toBe(false);
    const full = await openAlert("d1-full");
    expect(full).toBeDefined();
    expect(full!.reporters).toEqual(["database:DB"]);
    expect(full!.message).toMatch(/D1_SIZE_LIMIT_BYTES/);
    expect(await openAlert("d1-storage")).toBeDefined();
    const degraded = await health();
    expect(degraded.status).toBe("degraded");
    expect(degraded.reasons).toEqual(expect.arrayContaining(["d1-full", "d1-storage"]));
    expect(
      await eventually(
        async () => ((await noticesFor(full!.alertId)).includes("alert.opened") ? true : undefined),
        10_000,
        "the d1-full notice",
      ),
    ).toBe(true);

    // Room again (the limit raised): every waiting claim is relayed, none twice, and both alerts resolve.
    await breakShardBindings(shard, { D1_SIZE_LIMIT_BYTES: String(10 * 1024 ** 3) } as Partial<Env>);
    // The shard's own alarm, set to retry the held batch later, is what relays them.
    expect(await runDurableObjectAlarm(shard)).toBe(true);
    for (let round = 0; round < 10 && (await shard.relay()).remaining > 0; round++);
    const stored = await receiptsOf(delivered);
    expect(delivered.filter((key) => stored.get(key) !== 1)).toEqual([]);
    for (const key of waiting) expect(await waitForStatus("demo", key)).toBe("processed");
    const sentOfMine = (
      await env.DB.prepare("SELECT id FROM receipts WHERE event_key IN (SELECT value FROM json_each(?))")
        .bind(JSON.stringify(delivered))
        .all<{ id: string }>()
    ).results.map((row) => row.id);
    expect(sentOfMine.map((receiptId) => sent.filter((sentId) => sentId === receiptId).length)).toEqual(
      sentOfMine.map(() => 1),
    );
    expect(await openAlert("d1-full")).toBeUndefined();
    expect(await openAlert("d1-storage")).toBeUndefined();
    expect((await health()).reasons ?? []).not.toEqual(expect.arrayContaining(["d1-full"]));
  });
});

describe("a claim shard at its size limit", () => {
  it("answers a new key 503 and a known key as a duplicate, alerts, and takes new keys again with room", async () => {
    const [known, fresh] = keysOfOneShard("msg_full_shard", 2) as [string, string];
    const shard = shardFor(env, "demo", known);
    expect((await deliverDemo(known, credit("acct_full_shard", 1))).status).toBe(200);
    await waitForStatus("demo", known);

    const restore = await breakShardBindings(shard, {
      SHARD_SIZE_LIMIT_BYTES: String(await shard.storageBytes()),
    } as Partial<Env>);
    const refused = await deliverDemo(fresh, credit("acct_full_shard", 2));
    expect(refused.status).toBe(503);
    expect(refused.headers.get("retry-after")).not.toBeNull();
    expect(await shard.tombstone("demo", fresh)).toBeNull();
    const again = await deliverDemo(known, credit("acct_full_shard", 1));
    expect(again.status).toBe(200);
    expect(await again.json()).toMatchObject({ status: "duplicate" });
    // Another shard, with room, acknowledges as ever.
    const elsewhere = keysOfOneShard("msg_full_shard_other", 30).find(
      (key) => shardFor(env, "demo", key).id.toString() !== shard.id.toString(),
    );
    if (elsewhere !== undefined) expect((await deliverDemo(elsewhere, credit("acct_full_other", 1))).status).toBe(200);

    const full = await openAlert("shard-full");
    expect(full).toBeDefined();
    expect(full!.message).toMatch(/SHARD_SIZE_LIMIT_BYTES/);
    expect((await health()).reasons).toContain("shard-full");

    await restore();
    expect((await deliverDemo(fresh, credit("acct_full_shard", 2))).status).toBe(200);
    expect(await waitForStatus("demo", fresh)).toBe("processed");
    // The cron's visit sees room and resolves it.
    await shard.sweep(0, 1);
    expect(await openAlert("shard-full")).toBeUndefined();
    expect((await health()).reasons ?? []).not.toContain("shard-full");
  });
});

describe("the decision", () => {
  it("writes below the warning, writes and warns above it, refuses at the limit", () => {
    const limit = { limitBytes: 1000, warnAboveBytes: 800 };
    expect(storeVerdict(0, limit)).toBe("write");
    expect(storeVerdict(800, limit)).toBe("write");
    expect(storeVerdict(801, limit)).toBe("write-and-warn");
    expect(storeVerdict(999, limit)).toBe("write-and-warn");
    expect(storeVerdict(1000, limit)).toBe("refuse");
    expect(storeVerdict(5000, limit)).toBe("refuse");
  });

  it("reads D1_SIZE_LIMIT_BYTES, warns from 80 % of it, and falls back to D1's 10 GB on anything not a whole number", () => {
    expect(databaseLimit({ D1_SIZE_LIMIT_BYTES: "1000" })).toEqual({ limitBytes: 1000, warnAboveBytes: 800 });
    for (const value of [undefined, "", "ten", "-5", "1.5", "0"])
      expect(databaseLimit({ D1_SIZE_LIMIT_BYTES: value }).limitBytes).toBe(10 * 1024 ** 3);
  });

  it("reports each database's warning and fullness under its own name, so one database's room clears only its own", () => {
    const limit = { limitBytes: 1000, warnAboveBytes: 800 };
    const firing = (observations: ReturnType<typeof databaseStoreObservations>) =>
      observations.filter((observation) => observation.firing).map((o) => `${o.kind} ${o.reporter}`);
    expect(firing(databaseStoreObservations("DB_EU", 900, limit))).toEqual(["d1-storage database:DB_EU"]);
    expect(firing(databaseStoreObservations("DB_EU", 1000, limit))).toEqual([
      "d1-storage database:DB_EU",
      "d1-full database:DB_EU",
    ]);
    const cron = cronObservations(
      {
        databases: [
          { binding: "DB", reachable: true, sizeBytes: 10 },
          { binding: "DB_EU", reachable: true, sizeBytes: 1000 },
        ],
        failedSteps: [],
      },
      limit,
    );
    expect(firing(cron)).toEqual(["d1-storage database:DB_EU", "d1-full database:DB_EU"]);
    expect(cron.filter((o) => o.reporter === "database:DB" && o.kind.startsWith("d1-")).map((o) => o.firing)).toEqual([
      false,
      false,
    ]);
  });
});
