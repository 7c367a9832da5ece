import { env } from "cloudflare:workers";
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { database } from "../../src/db/client";
import { quarantine } from "../../src/db/schema";
import { ulid } from "../../src/lib/ulid";
import { credit, eventually, post, signDemo, waitForStatus } from "../support/deliveries";
import { adminGet, deliverTo, uniqueSource } from "./support";

/**
 * A quarantine row reaches D1 when its shard relays it, like a receipt, under an id minted on arrival: a relay held
 * up inserts rows with ids a reader has already paged past. Paging the quarantine must not skip them.
 */

type QuarantinePage = { quarantine: { quarantineId: string }[]; nextCursor: string | null };

async function page(query: string): Promise<QuarantinePage> {
  const response = await adminGet(`/admin/api/quarantine?${query}`);
  expect(response.status, await response.clone().text()).toBe(200);
  return response.json<QuarantinePage>();
}

/** Writes a quarantine row straight into D1, as the relay would have at `relayedAt`. */
async function seedQuarantine(source: string, receivedAt: number, relayedAt: number): Promise<string> {
  const quarantineId = ulid(receivedAt);
  await database(env)
    .insert(quarantine)
    .values({
      quarantineId,
      source,
      eventKey: `q_${quarantineId}`,
      reason: "payload-mismatch",
      payloadSha256: "1".repeat(64),
      receivedAt,
      relayedAt,
    });
  return quarantineId;
}

/** Pages from `cursor` to the end, returning every id listed. */
async function rest(source: string, cursor: string | null, limit: number): Promise<string[]> {
  const listed: string[] = [];
  for (let pages = 0; cursor !== null && pages < 20; pages++) {
    const next = await page(`source=${source}&limit=${limit}&before=${encodeURIComponent(cursor)}`);
    expect(next.quarantine.length).toBeLessThanOrEqual(limit);
    listed.push(...next.quarantine.map((record) => record.quarantineId));
    cursor = next.nextCursor;
  }
  expect(cursor).toBeNull();
  return listed;
}

describe("paging through quarantine while late relays arrive", () => {
  it("lists a row relayed between two pages, whatever its id, once, and resumes a catch-up larger than a page", async () => {
    const source = uniqueSource("quarantine-late");
    const t = Date.now() - 60_000;
    const prompt = [];
    for (let n = 0; n < 4; n++) prompt.push(await seedQuarantine(source, t + n * 1_000, t + n * 1_000 + 500));

    const first = await page(`source=${source}&limit=2`);
    expect(first.quarantine.map((record) => record.quarantineId)).toEqual([prompt[3], prompt[2]]);

    // Relayed after the first page was read: between its rows, above them all, and a burst older than the cursor.
    const now = Date.now();
    const late = [await seedQuarantine(source, t + 2_500, now), await seedQuarantine(source, now - 2_000, now)];
    for (let n = 0; n < 3; n++) late.push(await seedQuarantine(source, t + 3_100 + n * 100, now + 1));

    const listed = [
      ...first.quarantine.map((record) => record.quarantineId),
      ...(await rest(source, first.nextCursor, 2)),
    ];
    expect([...listed].sort()).toEqual([...prompt, ...late].sort());
    expect(new Set(listed).size).toBe(listed.length);
  });

  it("lists a row one database relayed late behind the reader, across databases", async () => {
    // Far-future ids, so these rows sort above every other test's and the first pages are theirs alone.
    const t = Date.UTC(2090, 0, 1) + Math.floor(Math.random() * 1e11);
    const relayed = Date.now() - 60_000;
    const inDatabase = async (where: "DB" | "DB_SECOND", n: number, relayedAt = relayed) => {
      const quarantineId = ulid(t + n);
      await database({ DB: where === "DB" ? env.DB : env.DB_SECOND })
        .insert(quarantine)
        .values({
          quarantineId,
          source: where === "DB" ? "demo" : "second-db",
          eventKey: `q_${quarantineId}`,
          reason: "payload-mismatch",
          payloadSha256: "1".repeat(64),
          receivedAt: t + n,
          relayedAt,
        });
      return quarantineId;
    };
    const [q0, q1, q2, q3] = [
      await inDatabase("DB", 0),
      await inDatabase("DB_SECOND", 1_000),
      await inDatabase("DB", 2_000),
      await inDatabase("DB_SECOND", 3_000),
    ];
    const first = await page(`limit=2&before=${ulid(t + 4_000)}`);
    expect(first.quarantine.map((record) => record.quarantineId)).toEqual([q3, q2]);
    const late = await inDatabase("DB_SECOND", 2_500, Date.now());
    const second = await page(`limit=2&before=${encodeURIComponent(first.nextCursor!)}`);
    expect(second.quarantine.map((record) => record.quarantineId)).toEqual([late, q1]);
    const third = await page(`limit=1&before=${encodeURIComponent(second.nextCursor!)}`);
    expect(third.quarantine.map((record) => record.quarantineId)).toEqual([q0]);
  });

  it("stamps a relayed quarantine row with D1's clock", async () => {
    const eventKey = `msg_quarantine_${crypto.randomUUID()}`;
    await deliverTo("admin-audit", eventKey, credit(`acct_${eventKey}`, 7));
    await waitForStatus("admin-audit", eventKey);
    const tampered = JSON.stringify(credit(`acct_${eventKey}`, 7000));
    expect(await (await post("/webhooks/admin-audit", tampered, signDemo(eventKey, tampered))).json()).toMatchObject({
      status: "quarantined",
    });
    const [row] = await eventually(async () => {
      const rows = await database(env).select().from(quarantine).where(eq(quarantine.eventKey, eventKey));
      return rows.length > 0 ? rows : undefined;
    });
    expect(row!.relayedAt).toBeGreaterThanOrEqual(row!.receivedAt);
    expect(row!.relayedAt).toBeLessThanOrEqual(Date.now() + 1_000);
  });
});
