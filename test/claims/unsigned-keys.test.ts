import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import Stripe from "stripe";
import { describe, expect, it } from "vitest";
import { shardsOf } from "../../src/claims/routing";
import type { ClaimShard } from "../../src/claims/shard";
import { migrateUnsignedKeyColumn } from "../../src/claims/shard-schema";
import { sha256Hex } from "../../src/crypto/digest";
import { difference, meterReading, sumReadings } from "../../src/lib/meter";
import { account, credit, post } from "../support/deliveries";
import { deliverGithub } from "../support/github";
import { quarantineFor, receiptsFor, settle, settleEachTest, shardClaim } from "../support/storage";

/**
 * Invariant 9, "genuine means fresh, too": GitHub signs the body but not X-GitHub-Delivery, the dedupe key. A
 * captured delivery resent under a new delivery id is the same signed content, so it must be a duplicate — within
 * the dedupe window — however many copies race. Everything here goes through the real route, shard, relay, queue
 * and the accounts handler, and is checked in the stored state.
 */

const SOURCE = "uk-github";
type Answer = { status: string; receipt: string };

let counter = 0;
const unique = (name: string) => `${name}_${Date.now().toString(36)}_${++counter}`;

/** Every receipt D1 holds for these exact bytes, under whatever key. */
async function receiptsOfBody(source: string, body: string) {
  const { results } = await env.DB.prepare(
    "SELECT id AS receiptId, event_key AS eventKey, status FROM receipts WHERE source = ? AND payload_sha256 = ?",
  )
    .bind(source, await sha256Hex(new TextEncoder().encode(body)))
    .all<{ receiptId: string; eventKey: string; status: string }>();
  return results;
}

/** Billed units so far in this Worker's isolate and every isolate one source's shards run in (each counted once). */
async function metersOf(source: string) {
  return sumReadings([meterReading(), ...(await Promise.all(shardsOf(env, source).map((shard) => shard.meters())))]);
}

settleEachTest();

describe("a signed body replayed under a new unsigned dedupe key", { timeout: 60_000 }, () => {
  it("is a duplicate: same signed body, new X-GitHub-Delivery → 2xx duplicate, no second receipt in D1, the credit applied once", async () => {
    const accountId = unique("acct_uk_replay");
    const body = JSON.stringify(credit(accountId, 5));
    const [originalId, replayId] = [unique("gh_original"), unique("gh_replay")];

    const first = await (await deliverGithub(SOURCE, originalId, body)).json<Answer>();
    expect(first.status).toBe("accepted");
    const replay = await deliverGithub(SOURCE, replayId, body);
    expect(replay.status).toBe(200);
    expect(await replay.json<Answer>()).toEqual({ status: "duplicate", receipt: first.receipt });

    await settle();
    expect(await receiptsOfBody(SOURCE, body)).toEqual([
      { receiptId: first.receipt, eventKey: originalId, status: "processed" },
    ]);
    expect(await receiptsFor(SOURCE, replayId)).toEqual([]);
    expect((await account(accountId))?.credits).toBe(5);
  });

  it("admits exactly one of many concurrent copies under different delivery ids", async () => {
    const accountId = unique("acct_uk_race");
    const body = JSON.stringify(credit(accountId, 7));
    const ids = Array.from({ length: 12 }, (_, index) => unique(`gh_race_${index}`));

    const answers = await Promise.all(ids.map(async (id) => (await deliverGithub(SOURCE, id, body)).json<Answer>()));
    expect(answers.filter((answer) => answer.status === "accepted")).toHaveLength(1);
    expect(answers.filter((answer) => answer.status === "duplicate")).toHaveLength(ids.length - 1);
    expect(new Set(answers.map((answer) => answer.receipt)).size).toBe(1);

    await settle();
    const stored = await receiptsOfBody(SOURCE, body);
    expect(stored).toEqual([expect.objectContaining({ receiptId: answers[0]!.receipt, status: "processed" })]);
    expect(ids).toContain(stored[0]!.eventKey);
    expect((await account(accountId))?.credits).toBe(7);
  });

  it("still answers a genuine GitHub redelivery (same delivery id, same body) duplicate", async () => {
    const accountId = unique("acct_uk_retry");
    const body = JSON.stringify(credit(accountId, 3));
    const deliveryId = unique("gh_retry");
    const first = await (await deliverGithub(SOURCE, deliveryId, body)).json<Answer>();
    await settle();
    const again = await (await deliverGithub(SOURCE, deliveryId, body)).json<Answer>();
    expect(again).toEqual({ status: "duplicate", receipt: first.receipt });
    await settle();
    expect(await receiptsFor(SOURCE, deliveryId)).toEqual([
      expect.objectContaining({ receiptId: first.receipt, status: "processed" }),
    ]);
    expect((await account(accountId))?.credits).toBe(3);
  });

  it("still quarantines the same delivery id with other bytes (D1's unique key decides), never applying them", async () => {
    const accountId = unique("acct_uk_changed");
    const deliveryId = unique("gh_changed");
    const original = JSON.stringify(credit(accountId, 11));
    const changed = JSON.stringify(credit(accountId, 11_000));
    const first = await (await deliverGithub(SOURCE, deliveryId, original)).json<Answer>();
    expect(first.status).toBe("accepted");
    await settle();
    expect((await deliverGithub(SOURCE, deliveryId, changed)).status).toBe(200);

    await settle();
    expect(await receiptsFor(SOURCE, deliveryId)).toEqual([
      expect.objectContaining({ receiptId: first.receipt, status: "processed" }),
    ]);
    expect(await quarantineFor(SOURCE, deliveryId)).toEqual([
      expect.objectContaining({
        reason: "payload-mismatch",
        originalReceiptId: first.receipt,
        payloadSha256: await sha256Hex(new TextEncoder().encode(changed)),
      }),
    ]);
    expect((await account(accountId))?.credits).toBe(11);
  });

  it("is a new event once the original's key is past the dedupe window (its tombstone pruned)", async () => {
    const source = "uk-github-window";
    const accountId = unique("acct_uk_window");
    const body = JSON.stringify(credit(accountId, 2));
    expect((await (await deliverGithub(source, unique("gh_window_first"), body)).json<Answer>()).status).toBe(
      "accepted",
    );
    await settle();
    // Retention forgets every key of this source received before now (the cron does this at 35 days by default).
    const cutoff = Date.now() + 1;
    for (const shard of shardsOf(env, source)) await shard.pruneKeys(cutoff);

    expect((await (await deliverGithub(source, unique("gh_window_late"), body)).json<Answer>()).status).toBe(
      "accepted",
    );
    await settle();
    expect(await receiptsOfBody(source, body)).toHaveLength(2);
    expect((await account(accountId))?.credits).toBe(4);
  });
});

describe("a signed-key source (Stripe: the event id is in the signed body)", { timeout: 60_000 }, () => {
  const stripe = new Stripe("sk_test_not_used_for_network");

  it("is claimed under its event id in the shard that id routes to, with no extra Durable Object row", async () => {
    const eventId = unique("evt_uk");
    const payload = JSON.stringify({
      id: eventId,
      object: "event",
      type: "charge.succeeded",
      created: 1_700_000_000,
      data: { object: { id: `ch_${eventId}` } },
    });
    const secret = (env as unknown as Record<string, string>).UK_STRIPE_SECRET!;
    const signature = await stripe.webhooks.generateTestHeaderStringAsync({ payload, secret });

    await settle();
    const before = await metersOf("uk-stripe");
    const answer = await (
      await post("/webhooks/uk-stripe", payload, { "stripe-signature": signature, "content-type": "application/json" })
    ).json<Answer>();
    expect(answer.status).toBe("accepted");
    await settle();
    const spent = difference(await metersOf("uk-stripe"), before);

    expect(await shardClaim("uk-stripe", eventId)).toMatchObject({ receiptId: answer.receipt, relayed: true });
    // The claim's insert and the relay's tombstone update; alarms are counted apart.
    expect(spent.doRowsWritten - spent.doAlarmWrites).toBe(2);
  });
});

describe("a shard created before unsigned keys were keyed by payload hash", () => {
  it("gains the unsigned_event_key column on start, keeping its tombstones: a resend is still a duplicate", async () => {
    const stub = env.CLAIM_SHARDS.get(env.CLAIM_SHARDS.idFromName("uk-migration#0"));
    await runInDurableObject(stub, async (shard: ClaimShard, state) => {
      const sql = state.storage.sql;
      // The table as it was: no unsigned_event_key. One relayed tombstone in it.
      sql.exec("DROP TABLE event_claims");
      sql.exec(`CREATE TABLE event_claims (relay_pending INTEGER NOT NULL, source TEXT NOT NULL, event_key TEXT NOT NULL,
        receipt_id TEXT NOT NULL, payload_sha256 TEXT NOT NULL, received_at INTEGER NOT NULL, provenance TEXT NOT NULL,
        event_type TEXT, subject TEXT, version INTEGER, occurred_at INTEGER, kept_headers TEXT, body BLOB,
        PRIMARY KEY (relay_pending, source, event_key)) WITHOUT ROWID`);
      sql.exec(
        "INSERT INTO event_claims (relay_pending, source, event_key, receipt_id, payload_sha256, received_at, provenance) VALUES (0, 'uk-migration', 'msg_old', 'r_old', 'h_old', ?, 'live')",
        Date.now(),
      );

      migrateUnsignedKeyColumn(sql);
      migrateUnsignedKeyColumn(sql);
      expect(
        sql.exec("SELECT name FROM pragma_table_info('event_claims') WHERE name = 'unsigned_event_key'").toArray(),
      ).toHaveLength(1);
      const resend = await shard.claim({
        source: "uk-migration",
        eventKey: "msg_old",
        eventKeySigned: true,
        payloadSha256: "h_old",
        eventType: null,
        subjectId: null,
        version: null,
        occurredAt: null,
        body: new Uint8Array(0),
        keptHeaders: "{}",
        receivedAt: Date.now(),
        provenance: "live",
      });
      expect(resend).toEqual({ disposition: "duplicate", receiptId: "r_old" });
    });
  });
});
