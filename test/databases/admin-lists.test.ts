import { env, exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { issueSession } from "../../src/admin/guards/auth";
import { searchReceipts } from "../../src/admin/receipts/lists";
import { database } from "../../src/db/client";
import { quarantine, receipts } from "../../src/db/schema";
import { difference, meterReading } from "../../src/lib/meter";
import { ulid } from "../../src/lib/ulid";
import { receiptDatabaseBindings } from "../../src/sources/databases";
import { adminGet } from "../admin/support";

/**
 * Past one database, the admin lists: receipts, dead letters, changes and quarantine in `DB` and `DB_SECOND`
 * appear in one list, paged without skipping or repeating a receipt; a source filter reads its own database only.
 */

type Summary = { receiptId: string; source: string; status: string };
type Page = { receipts: Summary[]; nextCursor: string | null; prevCursor: string | null };
type Where = "DB" | "DB_SECOND";

const d1 = (where: Where) => database({ DB: where === "DB" ? env.DB : env.DB_SECOND });

/** A receipt row written straight into one database, as the relay would have. */
async function seed(
  where: Where,
  row: Partial<typeof receipts.$inferInsert> & { receivedAt: number },
): Promise<string> {
  const receiptId = row.receiptId ?? ulid(row.receivedAt);
  const source = where === "DB" ? "demo" : "second-db";
  await d1(where)
    .insert(receipts)
    .values({
      source,
      eventKey: `evt_${receiptId}`,
      payloadSha256: "0".repeat(64),
      status: "processed",
      relayedAt: row.receivedAt + 500,
      ...row,
      receiptId,
    });
  return receiptId;
}

/** A minute of receipt ids no other test uses (years back, at random), so an unfiltered list sees only this test's. */
function quietMinute(): { t: number; range: string } {
  const t = Date.UTC(2001, 0, 1) + Math.floor(Math.random() * 5e11);
  return { t, range: `since=${t}&until=${t + 60_000}` };
}

async function get<T>(path: string): Promise<T> {
  const response = await adminGet(path);
  expect(response.status, await response.clone().text()).toBe(200);
  return response.json<T>();
}

const ids = (page: Page) => page.receipts.map((receipt) => receipt.receiptId);

/** Every page older from the first, `limit` at a time; what each page listed. */
async function pageOlder(
  query: string,
  limit: number,
  between?: (page: number) => Promise<void>,
): Promise<{ pages: Page[]; listed: string[] }> {
  const pages = [await get<Page>(`/admin/api/receipts?${query}&limit=${limit}`)];
  for (let turn = 0; pages.at(-1)!.nextCursor !== null && turn < 40; turn++) {
    await between?.(turn);
    pages.push(
      await get<Page>(
        `/admin/api/receipts?${query}&limit=${limit}&before=${encodeURIComponent(pages.at(-1)!.nextCursor!)}`,
      ),
    );
  }
  expect(pages.at(-1)!.nextCursor).toBeNull();
  return { pages, listed: pages.flatMap(ids) };
}

/** Five receipts in each database, their ids interleaved, relayed on time. */
async function interleaved(t: number): Promise<string[]> {
  const seeded: string[] = [];
  for (let n = 0; n < 10; n++) seeded.push(await seed(n % 3 === 0 ? "DB_SECOND" : "DB", { receivedAt: t + n * 1_000 }));
  return seeded;
}

describe("the admin lists across databases", () => {
  it("pages every receipt of both databases once, newest first, and back again to the newest", async () => {
    const { t, range } = quietMinute();
    const seeded = await interleaved(t);
    const newestFirst = [...seeded].reverse();

    const older = await pageOlder(range, 3);
    expect(older.listed).toEqual(newestFirst);
    expect(older.pages.map((page) => page.receipts.length)).toEqual([3, 3, 3, 1]);

    // Back up from the last page with `after`: every receipt above it, once, in the same order.
    const newer: Page[] = [];
    let cursor = older.pages.at(-1)!.prevCursor;
    for (let turn = 0; cursor !== null && turn < 10; turn++) {
      const page = await get<Page>(`/admin/api/receipts?${range}&limit=3&after=${encodeURIComponent(cursor)}`);
      newer.unshift(page);
      cursor = page.prevCursor;
    }
    expect(cursor).toBeNull();
    expect(newer.flatMap(ids)).toEqual(newestFirst.slice(0, 9));
  });

  it("reads every bound database for a source filter too, so a source that moved still lists what it left behind", async () => {
    const { t, range } = quietMinute();
    const seeded = await interleaved(t);
    // A row under the demo source's name in the other database, as a move leaves one: the demo list shows it.
    const stray = await seed("DB_SECOND", { receivedAt: t + 30_000, source: "demo" });

    const demo = await get<Page>(`/admin/api/receipts?${range}&source=demo&limit=50`);
    expect(ids(demo)).toEqual([stray, ...seeded.filter((_, n) => n % 3 !== 0).reverse()]);
    const second = await get<Page>(`/admin/api/receipts?${range}&source=second-db&limit=2`);
    expect(ids(second)).toEqual([seeded[9], seeded[6]]);
    const secondRest = await get<Page>(
      `/admin/api/receipts?${range}&source=second-db&limit=50&before=${encodeURIComponent(second.nextCursor!)}`,
    );
    expect(ids(secondRest)).toEqual([seeded[3], seeded[0]]);

    const filter = { receivedFrom: t, receivedUntil: t + 60_000, limit: 50 };
    const calls = async (read: () => Promise<unknown>) => {
      const before = meterReading();
      await read();
      return difference(meterReading().totals, before.totals).d1Calls;
    };
    // One D1 call per bound database, filtered or not.
    const bound = receiptDatabaseBindings(env).length;
    expect(await calls(() => searchReceipts(env, { ...filter, source: "demo" }))).toBe(bound);
    expect(await calls(() => searchReceipts(env, filter))).toBe(bound);
  });

  it("takes a single-database cursor on an unfiltered list, and a cross-database one on a filtered list", async () => {
    const { t, range } = quietMinute();
    const seeded = await interleaved(t);
    // A page of the demo source (one database): its cursor, at seeded[7], continues the list of both below it.
    const demo = await get<Page>(`/admin/api/receipts?${range}&source=demo&limit=2`);
    expect(ids(demo)).toEqual([seeded[8], seeded[7]]);
    const rest = await get<Page>(
      `/admin/api/receipts?${range}&limit=50&before=${encodeURIComponent(demo.nextCursor!)}`,
    );
    expect(ids(rest)).toEqual(seeded.slice(0, 7).reverse());
    // An unfiltered page's cursor, at seeded[7], read with a source filter: that source's receipts below it.
    const both = await get<Page>(`/admin/api/receipts?${range}&limit=3`);
    expect(both.nextCursor).toContain("~DB_SECOND.");
    const second = await get<Page>(
      `/admin/api/receipts?${range}&source=second-db&limit=50&before=${encodeURIComponent(both.nextCursor!)}`,
    );
    expect(ids(second)).toEqual([seeded[6], seeded[3], seeded[0]]);
  });

  it("lists dead letters of both databases in /dead", async () => {
    const { t, range } = quietMinute();
    const deadFirst = await seed("DB", { receivedAt: t, status: "dead" });
    const deadSecond = await seed("DB_SECOND", { receivedAt: t + 1_000, status: "dead" });
    await seed("DB_SECOND", { receivedAt: t + 2_000 });
    const dead = await get<Page>(`/admin/api/dead?${range}`);
    expect(ids(dead)).toEqual([deadSecond, deadFirst]);
  });

  it("catches up on receipts relayed late behind the reader in either database, more than a page of them", async () => {
    const { t, range } = quietMinute();
    const seeded = await interleaved(t);
    const late: string[] = [];
    const { listed } = await pageOlder(range, 2, async (turn) => {
      if (turn !== 0) return;
      // After the first page: held-up relays with ids among and below what was listed, in both databases.
      const relayedAt = Date.now();
      for (const [n, where] of (["DB_SECOND", "DB", "DB_SECOND", "DB_SECOND", "DB"] as const).entries()) {
        late.push(await seed(where, { receivedAt: t + 8_500 + n * 100, relayedAt }));
      }
      late.push(await seed("DB_SECOND", { receivedAt: t + 1, relayedAt }));
    });
    expect(new Set(listed).size).toBe(listed.length);
    expect([...listed].sort()).toEqual([...seeded, ...late].sort());
  });

  it("going back to newer pages, lists a receipt the second database relayed late below the reader", async () => {
    const { t, range } = quietMinute();
    const seeded = await interleaved(t);
    const first = await get<Page>(`/admin/api/receipts?${range}&limit=4`);
    const second = await get<Page>(
      `/admin/api/receipts?${range}&limit=4&before=${encodeURIComponent(first.nextCursor!)}`,
    );
    expect(ids(second)).toEqual([seeded[5], seeded[4], seeded[3], seeded[2]]);
    const lateBelow = await seed("DB_SECOND", { receivedAt: t + 500, relayedAt: Date.now() });
    const back = await get<Page>(
      `/admin/api/receipts?${range}&limit=5&after=${encodeURIComponent(second.prevCursor!)}`,
    );
    expect(ids(back)).toEqual([lateBelow, seeded[9], seeded[8], seeded[7], seeded[6]]);
  });

  it("tails changes in both databases, paged without skipping or repeating", async () => {
    const now = Date.now();
    const HOUR = 3_600_000;
    // Settled (older than SETTLE_MS), so one pass pages through all of them.
    const finished = [now - 46_000, now - 45_000, now - 45_000, now - 44_000, now - 43_000, now - 42_000];
    const changed: string[] = [];
    for (const [n, processedAt] of finished.entries()) {
      changed.push(
        await seed(n % 2 === 0 ? "DB_SECOND" : "DB", {
          receivedAt: now - HOUR + n,
          relayedAt: now - HOUR + n,
          processedAt,
        }),
      );
    }
    const seen: string[] = [];
    let cursor = String(now - 50_000);
    for (let call = 0; call < 100; call++) {
      const answer = await get<{ receipts: Summary[]; changesCursor: string; more: boolean }>(
        `/admin/api/receipts?changedSince=${cursor}&window=2h&limit=2`,
      );
      seen.push(...answer.receipts.map((receipt) => receipt.receiptId));
      cursor = answer.changesCursor;
      if (!answer.more) break;
    }
    expect(seen.filter((receiptId) => changed.includes(receiptId))).toEqual(changed);
    expect(new Set(seen).size).toBe(seen.length);
  });

  it("lists quarantine of both databases, newest first, paged across them", async () => {
    const t = Date.UTC(2090, 0, 1) + Math.floor(Math.random() * 1e11);
    const quarantined: string[] = [];
    for (let n = 0; n < 5; n++) {
      const quarantineId = ulid(t + n * 1_000);
      const where: Where = n % 2 === 0 ? "DB" : "DB_SECOND";
      await d1(where)
        .insert(quarantine)
        .values({
          quarantineId,
          source: where === "DB" ? "demo" : "second-db",
          eventKey: `q_${quarantineId}`,
          reason: "payload_mismatch",
          payloadSha256: "1".repeat(64),
          receivedAt: t + n * 1_000,
        });
      quarantined.unshift(quarantineId);
    }
    const listed: string[] = [];
    let before: string | null = ulid(t + 5_000);
    for (let turn = 0; before !== null && listed.length < 5 && turn < 10; turn++) {
      const page: { quarantine: { quarantineId: string }[]; nextCursor: string | null } = await get(
        `/admin/api/quarantine?limit=2&before=${before}`,
      );
      listed.push(...page.quarantine.map((record) => record.quarantineId));
      before = page.nextCursor;
    }
    expect(listed.slice(0, 5)).toEqual(quarantined);
    const secondOnly: { quarantine: { quarantineId: string }[] } = await get(
      `/admin/api/quarantine?source=second-db&limit=2&before=${ulid(t + 5_000)}`,
    );
    expect(secondOnly.quarantine.map((record) => record.quarantineId)).toEqual([quarantined[1], quarantined[3]]);
  });

  it("shows receipts of both databases on the dashboard's receipts and dead-letter pages", async () => {
    const { t, range } = quietMinute();
    const inFirst = await seed("DB", { receivedAt: t, status: "dead" });
    const inSecond = await seed("DB_SECOND", { receivedAt: t + 1_000, status: "dead" });
    const cookie = `admin_session=${await issueSession(env.ADMIN_TOKEN)}`;
    for (const path of [`/admin/receipts?${range}`, `/admin/dead?${range}`]) {
      const response = await exports.default.fetch(
        new Request(`https://receiver.test${path}`, { headers: { cookie } }),
      );
      expect(response.status, path).toBe(200);
      const html = await response.text();
      expect(html, path).toContain(inFirst);
      expect(html, path).toContain(inSecond);
    }
  });
});
