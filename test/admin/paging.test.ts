import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { LATE_RELAY_MS } from "../../src/admin/receipts/receipt-cursor";
import { ulid } from "../../src/lib/ulid";
import { adminGet, seedReceipt, uniqueSource } from "./support";

type Page = { receipts: { receiptId: string }[]; nextCursor: string | null; prevCursor: string | null };

async function page(query: string): Promise<Page> {
  const response = await adminGet(`/admin/api/receipts?${query}`);
  expect(response.status).toBe(200);
  return response.json<Page>();
}

/**
 * Receipt ids are minted on arrival, but a receipt reaches D1 when its shard relays it: a relay held up (D1 down,
 * a shard backing off) inserts receipts with older ids than ones already listed. Paging must not skip them.
 */
describe("paging through receipts while late relays arrive", () => {
  it("lists a receipt relayed between two pages, whatever its id, on a later page", async () => {
    const source = uniqueSource("paging-late");
    const t = Date.now() - 60_000;
    const prompt = async (receivedAt: number) => seedReceipt({ source, receivedAt, relayedAt: receivedAt + 500 });
    const oldest = await prompt(t);
    const older = await prompt(t + 1_000);
    const newer = await prompt(t + 2_000);
    const newest = await prompt(t + 3_000);

    const first = await page(`source=${source}&limit=2`);
    expect(first.receipts.map((receipt) => receipt.receiptId)).toEqual([newest, newer]);
    expect(first.nextCursor).not.toBeNull();

    // Relayed now, after the first page was read: one whose id falls between the first page's rows, one newer
    // than all of them though received before the page was read, and one older than everything listed so far.
    const now = Date.now();
    const lateBetween = await seedReceipt({ source, receivedAt: t + 2_500, relayedAt: now });
    const lateAbove = await seedReceipt({ source, receivedAt: now - 2_000, relayedAt: now });
    const lateBelow = await seedReceipt({ source, receivedAt: t - 600_000, relayedAt: now });

    const listed = first.receipts.map((receipt) => receipt.receiptId);
    let cursor = first.nextCursor;
    for (let pages = 0; cursor !== null && pages < 10; pages++) {
      const next = await page(`source=${source}&limit=2&before=${encodeURIComponent(cursor)}`);
      listed.push(...next.receipts.map((receipt) => receipt.receiptId));
      cursor = next.nextCursor;
    }
    expect(cursor).toBeNull();
    expect([...listed].sort()).toEqual([oldest, older, newer, newest, lateBetween, lateAbove, lateBelow].sort());
  });

  it("resumes a catch-up larger than a page on the next page, and still reaches the oldest receipts", async () => {
    const source = uniqueSource("paging-burst");
    const t = Date.now() - 120_000;
    const prompt = await Promise.all(
      [0, 1, 2, 3].map((n) => seedReceipt({ source, receivedAt: t + n * 1_000, relayedAt: t + n * 1_000 + 500 })),
    );
    const first = await page(`source=${source}&limit=2`);

    // Five receipts held up in one relay batch (one relayed_at), all with ids the reader has passed.
    const relayedAt = Date.now();
    const burst = await Promise.all(
      [0, 1, 2, 3, 4].map((n) => seedReceipt({ source, receivedAt: t + 3_000 + 100 * (n + 1), relayedAt })),
    );

    const listed = first.receipts.map((receipt) => receipt.receiptId);
    let cursor = first.nextCursor;
    for (let pages = 0; cursor !== null && pages < 10; pages++) {
      const next = await page(`source=${source}&limit=2&before=${encodeURIComponent(cursor)}`);
      expect(next.receipts.length).toBeLessThanOrEqual(2);
      listed.push(...next.receipts.map((receipt) => receipt.receiptId));
      cursor = next.nextCursor;
    }
    expect(cursor).toBeNull();
    expect([...listed].sort()).toEqual([...prompt, ...burst].sort());
    expect(new Set(listed).size).toBe(listed.length);
  });

  it("still takes a plain receipt id as a cursor, and refuses anything else", async () => {
    const source = uniqueSource("paging-plain");
    const t = Date.now() - 60_000;
    const [a, b] = [
      await seedReceipt({ source, receivedAt: t, relayedAt: t }),
      await seedReceipt({ source, receivedAt: t + 1, relayedAt: t + 1 }),
    ];
    expect((await page(`source=${source}&before=${b}`)).receipts.map((receipt) => receipt.receiptId)).toEqual([a]);
    const refused = await adminGet(`/admin/api/receipts?source=${source}&before=${b}.soon`);
    expect(refused.status).toBe(400);
  });

  it("costs the happy path nothing: only a receipt relayed late writes a row to the late-relay index", async () => {
    const source = uniqueSource("paging-cost");
    const insert = async (receivedAt: number, relayedAt: number) => {
      const result = await env.DB.prepare(
        "INSERT INTO receipts (id, source, event_key, payload_sha256, received_at, relayed_at, status) VALUES (?, ?, ?, ?, ?, ?, 'pending')",
      )
        .bind(ulid(receivedAt), source, `evt_${receivedAt}_${relayedAt}`, "0".repeat(64), receivedAt, relayedAt)
        .run();
      return result.meta.rows_written;
    };
    const t = Date.now() - 60_000;
    const onTime = await insert(t, t + LATE_RELAY_MS);
    const late = await insert(t + 1, t + 1 + LATE_RELAY_MS + 1);
    expect(late).toBe(onTime + 1);
  });

  it("going back to newer pages, lists a receipt relayed late below the reader", async () => {
    const source = uniqueSource("paging-newer");
    const t = Date.now() - 60_000;
    const [a, b, c, d] = await Promise.all(
      [0, 1, 2, 3].map((n) => seedReceipt({ source, receivedAt: t + n * 1_000, relayedAt: t + n * 1_000 + 500 })),
    );
    const first = await page(`source=${source}&limit=2`);
    const second = await page(`source=${source}&limit=2&before=${encodeURIComponent(first.nextCursor!)}`);
    expect(second.receipts.map((receipt) => receipt.receiptId)).toEqual([b, a]);

    // Relayed after the second page was read, with an id older than anything listed.
    const lateBelow = await seedReceipt({ source, receivedAt: t - 600_000, relayedAt: Date.now() });
    const back = await page(`source=${source}&limit=3&after=${encodeURIComponent(second.prevCursor!)}`);
    expect(back.receipts.map((receipt) => receipt.receiptId)).toEqual([lateBelow, d, c]);
  });
});
