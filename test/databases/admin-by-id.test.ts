import { env, exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { issueSession } from "../../src/admin/guards/auth";
import { database } from "../../src/db/client";
import { receipts } from "../../src/db/schema";
import { ulid } from "../../src/lib/ulid";
import { envForDatabase } from "../../src/sources/databases";
import { adminGet, adminPost, deliverTo } from "../admin/support";
import { credit, eventually } from "../support/deliveries";
import { expectUnchanged, settle, settleEachTest, snapshot } from "../support/storage";

/** Every D1 binding the test config has (vitest.config.ts): DB, the partition ring, DB_SECOND, in name order after DB. */
const BOUND_DATABASES = ["DB", "DB_P0", "DB_P1", "DB_P2", "DB_P3", "DB_SECOND"];

/**
 * Past one database, seen from the admin surface: a receipt of `second-db` lives in DB_SECOND, and everything that
 * names it by id — detail, event key, replay, dismiss, the dashboard — finds it there; the stats count each source
 * in its own database. The default database serves its own sources as before.
 */

type Binding = "DB" | "DB_SECOND";
const SOURCE_IN: Record<Binding, string> = { DB: "admin-audit", DB_SECOND: "second-db" };
const d1 = (binding: Binding): D1Database => env[binding];

async function row(binding: Binding, receiptId: string) {
  return d1(binding)
    .prepare("SELECT status, event_key AS eventKey FROM receipts WHERE id = ?")
    .bind(receiptId)
    .first<{ status: string; eventKey: string }>();
}

async function replayRows(binding: Binding, receiptId: string) {
  const { results } = await d1(binding)
    .prepare("SELECT previous_status AS previousStatus, requested_by AS requestedBy FROM replays WHERE receipt_id = ?")
    .bind(receiptId)
    .all();
  return results;
}

async function credits(binding: Binding, accountId: string): Promise<number | undefined> {
  return (
    await d1(binding).prepare("SELECT credits FROM accounts WHERE id = ?").bind(accountId).first<{ credits: number }>()
  )?.credits;
}

function waitForStatusIn(binding: Binding, receiptId: string, status = "processed"): Promise<true> {
  return eventually(
    async () => ((await row(binding, receiptId))?.status === status ? true : undefined),
    20_000,
    `${receiptId} ${status} in ${binding}`,
  );
}

/** A dead letter with a good body (it died of an outage since ended), written into one database as its relay would. */
async function seedDeadLetter(binding: Binding, receivedAt = Date.now()) {
  const eventKey = `msg_byid_${crypto.randomUUID()}`;
  const accountId = `acct_${eventKey}`;
  const receiptId = ulid(receivedAt);
  await database(envForDatabase(env, binding))
    .insert(receipts)
    .values({
      receiptId,
      source: SOURCE_IN[binding],
      eventKey,
      eventType: "account.credited",
      subjectId: accountId,
      receivedAt,
      payloadSha256: "0".repeat(64),
      status: "dead",
      attempts: 13,
      lastError: "gave up after 13 attempts: destination answered 503",
      body: Buffer.from(JSON.stringify(credit(accountId, 5))),
    });
  return { binding, receiptId, eventKey, accountId };
}

/** Delivered through the real route, shard, relay and consumer into DB_SECOND. */
async function deliverToSecond(): Promise<{ receiptId: string; eventKey: string }> {
  const eventKey = `msg_byid_live_${crypto.randomUUID()}`;
  expect((await deliverTo("second-db", eventKey, credit(`acct_${eventKey}`, 2))).status).toBe(200);
  const receiptId = await eventually(
    async () => {
      const found = await env.DB_SECOND.prepare(
        "SELECT id, status FROM receipts WHERE source = 'second-db' AND event_key = ?",
      )
        .bind(eventKey)
        .first<{ id: string; status: string }>();
      return found?.status === "processed" ? found.id : undefined;
    },
    20_000,
    `${eventKey} processed in DB_SECOND`,
  );
  return { receiptId, eventKey };
}

const ORIGIN = "https://receiver.test";
const dashboardCookie = async () => `admin_session=${await issueSession(env.ADMIN_TOKEN)}`;
function dashboard(path: string, cookie: string, form?: [string, string][]): Promise<Response> {
  const init: RequestInit = form
    ? {
        method: "POST",
        body: new URLSearchParams(form),
        headers: { cookie, origin: ORIGIN, "content-type": "application/x-www-form-urlencoded" },
      }
    : { headers: { cookie } };
  return exports.default.fetch(new Request(`${ORIGIN}${path}`, { redirect: "manual", ...init }));
}

settleEachTest();

describe("admin by id across databases", () => {
  it("finds a DB_SECOND receipt by id and by event key, and renders its dashboard page", async () => {
    const { receiptId, eventKey } = await deliverToSecond();
    expect(await row("DB", receiptId)).toBeNull();

    const byId = await adminGet(`/admin/api/receipts/${receiptId}`);
    expect(byId.status).toBe(200);
    expect(
      (await byId.json<{ receipt: { receiptId: string; source: string; eventKey: string; status: string } }>()).receipt,
    ).toMatchObject({
      receiptId,
      source: "second-db",
      eventKey,
      status: "processed",
    });
    const byKey = await adminGet(`/admin/api/sources/second-db/events/${eventKey}`);
    expect(byKey.status).toBe(200);
    expect((await byKey.json<{ receipt: { receiptId: string } }>()).receipt.receiptId).toBe(receiptId);
    // The key is the source's: under another source (another database) it is not found.
    expect((await adminGet(`/admin/api/sources/admin-audit/events/${eventKey}`)).status).toBe(404);
    expect((await adminGet(`/admin/api/receipts/${ulid()}`)).status).toBe(404);

    const cookie = await dashboardCookie();
    const page = await dashboard(`/admin/receipts/${receiptId}`, cookie);
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).toContain(eventKey);
    expect(html).toContain("second-db");
  });

  it("replays a DB_SECOND receipt by id in DB_SECOND, and writes nothing to DB", async () => {
    const dead = await seedDeadLetter("DB_SECOND");
    await settle();
    const before = await snapshot();
    const response = await adminPost(`/admin/api/receipts/${dead.receiptId}/replay`, {});
    expect(response.status).toBe(202);
    expect(await response.json()).toEqual({ receiptId: dead.receiptId, outcome: "replayed" });
    await waitForStatusIn("DB_SECOND", dead.receiptId);
    expect(await credits("DB_SECOND", dead.accountId)).toBe(5);
    expect(await replayRows("DB_SECOND", dead.receiptId)).toEqual([{ previousStatus: "dead", requestedBy: "api" }]);
    // DB (every table but the operator audit log) and the claim shards are exactly as they were; the audit log holds
    // the replay, by the admin token.
    await expectUnchanged(before);
    const { results: logged } = await env.DB.prepare(
      "SELECT actor, action, target, affected, outcome FROM operator_actions WHERE target = ?",
    )
      .bind(`receipt ${dead.receiptId}`)
      .all();
    expect(logged).toEqual([
      { actor: "admin-token", action: "replay", target: `receipt ${dead.receiptId}`, affected: 1, outcome: "allowed" },
    ]);
  });

  it("replays dead letters in bulk across both databases: by ids, by {all: true} page by page, by a source", async () => {
    const [second, first] = [await seedDeadLetter("DB_SECOND"), await seedDeadLetter("DB")];
    const byIds = await (
      await adminPost("/admin/api/dead/replay", { receiptIds: [second.receiptId, first.receiptId, ulid()] })
    ).json<{
      replayed: number;
      results: { outcome: string }[];
    }>();
    expect(byIds.replayed).toBe(2);
    expect(byIds.results.map((result) => result.outcome)).toEqual(["replayed", "replayed", "not_found"]);

    // A time slice nobody else writes to: one dead letter in each database.
    const slice = Date.parse("2025-04-01T00:00:00Z") + Math.floor(Math.random() * 1e9);
    const [inDb, inSecond] = [await seedDeadLetter("DB", slice), await seedDeadLetter("DB_SECOND", slice + 1)];
    const filter = { all: true, since: slice, until: slice + 2, limit: 1 };
    type Page = { replayed: number; more: boolean; cursor: string; results: { receiptId: string }[] };
    const firstPage = await (await adminPost("/admin/api/dead/replay", filter)).json<Page>();
    expect(firstPage).toMatchObject({
      replayed: 1,
      more: true,
      cursor: inDb.receiptId,
      results: [{ receiptId: inDb.receiptId }],
    });
    // One cursor goes on in both databases from the same place.
    const secondPage = await (
      await adminPost("/admin/api/dead/replay", { ...filter, after: firstPage.cursor })
    ).json<Page>();
    expect(secondPage).toMatchObject({
      replayed: 1,
      more: false,
      cursor: inSecond.receiptId,
      results: [{ receiptId: inSecond.receiptId }],
    });

    // A filter naming a source replays in that source's database.
    const bySource = await seedDeadLetter("DB_SECOND", slice + 5);
    const sourcePage = await (
      await adminPost("/admin/api/dead/replay", { source: "second-db", since: slice, until: slice + 10 })
    ).json<{ replayed: number; more: boolean }>();
    expect(sourcePage).toEqual({
      replayed: 1,
      more: false,
      cursor: bySource.receiptId,
      results: [{ receiptId: bySource.receiptId, outcome: "replayed" }],
    });

    for (const dead of [second, first, inDb, inSecond, bySource]) {
      await waitForStatusIn(dead.binding, dead.receiptId);
      expect(await credits(dead.binding, dead.accountId)).toBe(5);
      expect(await replayRows(dead.binding, dead.receiptId)).toEqual([{ previousStatus: "dead", requestedBy: "api" }]);
      const other: Binding = dead.binding === "DB" ? "DB_SECOND" : "DB";
      expect(await row(other, dead.receiptId)).toBeNull();
      expect(await replayRows(other, dead.receiptId)).toEqual([]);
      expect(await credits(other, dead.accountId)).toBeUndefined();
    }
  });

  it("replays from the dashboard's dead letters across both databases", async () => {
    const cookie = await dashboardCookie();
    const [second, first] = [await seedDeadLetter("DB_SECOND"), await seedDeadLetter("DB")];
    const bulk = await dashboard("/admin/dead/action", cookie, [
      ["action", "replay"],
      ["receiptId", second.receiptId],
      ["receiptId", first.receiptId],
    ]);
    expect(bulk.status).toBe(303);
    expect(
      decodeURIComponent(bulk.headers.getSetCookie().find((value) => value.startsWith("admin_flash="))!),
    ).toContain("2 receipts replayed.");
    for (const dead of [second, first]) {
      await waitForStatusIn(dead.binding, dead.receiptId);
      expect(await replayRows(dead.binding, dead.receiptId)).toEqual([
        { previousStatus: "dead", requestedBy: "dashboard" },
      ]);
    }
  });

  it("dismisses and restores dead letters wherever they live, through the API and the dashboard", async () => {
    const [second, first] = [await seedDeadLetter("DB_SECOND"), await seedDeadLetter("DB")];
    const ids = [second.receiptId, first.receiptId];
    const dismissed = await (await adminPost("/admin/api/dead/dismiss", { receiptIds: [...ids, ulid()] })).json<{
      changed: string[];
      unchanged: string[];
    }>();
    expect(dismissed.changed).toEqual([...ids].sort());
    expect(dismissed.unchanged).toHaveLength(1);
    expect((await row("DB_SECOND", second.receiptId))?.status).toBe("dismissed");
    expect((await row("DB", first.receiptId))?.status).toBe("dismissed");

    const restored = await (await adminPost("/admin/api/dead/restore", { receiptIds: ids })).json<{
      changed: string[];
      unchanged: string[];
    }>();
    expect(restored).toEqual({ changed: [...ids].sort(), unchanged: [] });
    expect((await row("DB_SECOND", second.receiptId))?.status).toBe("dead");

    const cookie = await dashboardCookie();
    expect(
      (
        await dashboard("/admin/dead/action", cookie, [
          ["action", "dismiss"],
          ["receiptId", second.receiptId],
        ])
      ).status,
    ).toBe(303);
    expect((await row("DB_SECOND", second.receiptId))?.status).toBe("dismissed");
    expect(
      (
        await dashboard("/admin/dead/action", cookie, [
          ["action", "restore"],
          ["receiptId", second.receiptId],
        ])
      ).status,
    ).toBe(303);
    expect((await row("DB_SECOND", second.receiptId))?.status).toBe("dead");
  });
});

type SourceNumbers = { source: string; received: number; processed: number; deadTotal: number };
type Storage = {
  d1Bytes: number;
  d1UsedFraction: number;
  d1CapBytes: number;
  d1Databases: { binding: string; bytes: number; usedFraction: number }[];
};

describe("stats across databases", () => {
  it("counts second-db from DB_SECOND only, sizes every database, and draws its dashboard pages", async () => {
    await deliverToSecond();
    await seedDeadLetter("DB_SECOND");
    // A stray second-db row in DB (say, from before the source moved) is not the source's: it is not counted.
    await database(env)
      .insert(receipts)
      .values({
        receiptId: ulid(),
        source: "second-db",
        eventKey: `msg_stray_${crypto.randomUUID()}`,
        receivedAt: Date.now(),
        payloadSha256: "0".repeat(64),
        status: "processed",
      });

    const one = await (await adminGet("/admin/api/stats?source=second-db&window=1h")).json<{
      sources: SourceNumbers[];
      storage: Storage;
    }>();
    const all = await (await adminGet("/admin/api/stats?window=1h")).json<{
      sources: SourceNumbers[];
      storage: Storage;
    }>();
    const since = Date.now() - 3_600_000;
    const expected = await env.DB_SECOND.prepare(
      "SELECT COUNT(*) AS received, SUM(status = 'processed') AS processed FROM receipts WHERE source = 'second-db' AND received_at >= ?",
    )
      .bind(since)
      .first<{ received: number; processed: number }>();
    const deadTotal = (await env.DB_SECOND.prepare(
      "SELECT COUNT(*) AS total FROM receipts WHERE source = 'second-db' AND status = 'dead'",
    ).first<{ total: number }>())!.total;
    expect(expected!.received).toBeGreaterThanOrEqual(2);
    for (const report of [one, all]) {
      expect(report.sources.find((entry) => entry.source === "second-db")).toMatchObject({
        received: expected!.received,
        processed: expected!.processed,
        deadTotal,
      });
    }

    for (const storage of [one.storage, all.storage]) {
      expect(storage.d1Databases.map((entry) => entry.binding)).toEqual(BOUND_DATABASES);
      for (const entry of storage.d1Databases) expect(entry.bytes, entry.binding).toBeGreaterThan(0);
      expect(storage.d1Bytes).toBe(Math.max(...storage.d1Databases.map((entry) => entry.bytes)));
      expect(storage.d1UsedFraction).toBeCloseTo(storage.d1Bytes / storage.d1CapBytes, 4);
    }
    const health = await (await adminGet("/admin/api/health?source=second-db")).json<{ storage: Storage }>();
    expect(health.storage.d1Databases.map((entry) => entry.binding)).toEqual(BOUND_DATABASES);

    const cookie = await dashboardCookie();
    const received24h = (await env.DB_SECOND.prepare(
      "SELECT COUNT(*) AS total FROM receipts WHERE source = 'second-db' AND received_at >= ?",
    )
      .bind(Date.now() - 23 * 3_600_000)
      .first<{ total: number }>())!.total;
    const sourcePage = await dashboard("/admin/sources/second-db", cookie);
    expect(sourcePage.status).toBe(200);
    expect(await sourcePage.text()).toMatch(new RegExp(`id="chart-received" data-total="${received24h}"`));
    const overview = await dashboard("/admin", cookie);
    expect(overview.status).toBe(200);
    expect(await overview.text()).toContain('data-source="second-db"');
  });
});
