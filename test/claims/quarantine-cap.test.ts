import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { QUARANTINE_KEPT_COPIES, quarantineStep } from "../../src/claims/quarantine";
import { shardFor } from "../../src/claims/routing";
import type { ClaimShard } from "../../src/claims/shard";
import { ADMIN, adminGet, dashboardPage, dashboardSession } from "../admin/support";
import { deliverDemo } from "../support/deliveries";
import { settle, settleEachTest } from "../support/storage";

/**
 * One signed key sent with many different bodies (a replay of a captured Adyen item in other batches, a Mailgun
 * token beside other event data): the quarantine keeps QUARANTINE_KEPT_COPIES of them whole and counts the rest, so
 * what it stores per key is bounded whatever is sent, and the count says how many came.
 */

settleEachTest();

type Answer = { status: string; receipt: string };

/** A distinct body of about `padBytes`, as an attacker varying a captured delivery would send. */
const variant = (index: number, padBytes: number) => ({
  type: "account.credited",
  data: { account: `acct_variant_${index}`, amount: index, note: "x".repeat(padBytes) },
});

async function shardQuarantine(eventKey: string) {
  return runInDurableObject(shardFor(env, "demo", eventKey), (_instance: ClaimShard, state) => {
    const sql = state.storage.sql;
    const kept = sql
      .exec<{ rows: number; bodyBytes: number }>(
        "SELECT COUNT(*) AS rows, COALESCE(SUM(LENGTH(body)), 0) AS bodyBytes FROM quarantine_outbox WHERE source = 'demo' AND event_key = ?",
        eventKey,
      )
      .one();
    const counters = sql
      .exec<{ copies: number }>(
        "SELECT copies FROM quarantine_overflow WHERE source = 'demo' AND event_key = ?",
        eventKey,
      )
      .toArray();
    return { keptRows: kept.rows, keptBodyBytes: kept.bodyBytes, counters: counters.map((row) => row.copies) };
  });
}

async function d1Quarantine(eventKey: string) {
  return (
    await env.DB.prepare(
      `SELECT id, copies, payload_sha256 AS payloadSha256, COALESCE(LENGTH(body), 0) AS bodyBytes,
         kept_headers IS NOT NULL AS hasHeaders FROM quarantine WHERE source = 'demo' AND event_key = ? ORDER BY id`,
    )
      .bind(eventKey)
      .all<{ id: string; copies: number; payloadSha256: string; bodyBytes: number; hasHeaders: number }>()
  ).results;
}

/** The stats' quarantined count for the demo source over the last hour. */
async function quarantinedInStats(): Promise<number> {
  const response = await adminGet("/admin/api/stats?source=demo&window=1h", ADMIN);
  return (await response.json<{ sources: { quarantined: number }[] }>()).sources[0]!.quarantined;
}

const sum = (values: number[]) => values.reduce((total, value) => total + value, 0);

describe("quarantine copies per key are capped", () => {
  it(`keeps ${QUARANTINE_KEPT_COPIES} distinct copies whole and counts the rest: N bodies for one key store ${QUARANTINE_KEPT_COPIES} bodies and one counter, and the count is N - 1`, async () => {
    const eventKey = `msg_capped_${crypto.randomUUID()}`;
    const PAD = 20_000;
    const N = 12;
    const quarantinedBefore = await quarantinedInStats();
    const first = await (await deliverDemo(eventKey, variant(0, PAD))).json<Answer>();
    expect(first.status).toBe("accepted");
    for (let index = 1; index < N; index++) {
      const answer = await (await deliverDemo(eventKey, variant(index, PAD))).json<Answer>();
      expect(answer).toEqual({ status: "quarantined", receipt: first.receipt });
    }
    await settle();

    // The shard: the kept copies' hashes (bodies dropped at relay) and one counter.
    expect(await shardQuarantine(eventKey)).toEqual({
      keptRows: QUARANTINE_KEPT_COPIES,
      keptBodyBytes: 0,
      counters: [N - 1 - QUARANTINE_KEPT_COPIES],
    });
    // D1: the kept copies with their bodies, then one row with no body and no headers counting the rest.
    const rows = await d1Quarantine(eventKey);
    expect(rows).toHaveLength(QUARANTINE_KEPT_COPIES + 1);
    expect(rows.filter((row) => row.bodyBytes > 0)).toHaveLength(QUARANTINE_KEPT_COPIES);
    expect(sum(rows.map((row) => row.bodyBytes))).toBeLessThan((QUARANTINE_KEPT_COPIES + 1) * PAD);
    const counter = rows.find((row) => row.copies > 1)!;
    expect(counter).toMatchObject({ copies: N - 1 - QUARANTINE_KEPT_COPIES, bodyBytes: 0, hasHeaders: 0 });
    expect(sum(rows.map((row) => row.copies))).toBe(N - 1);

    // The admin list shows every row with its count, so the total is there to read.
    const listed = await (await adminGet("/admin/api/quarantine?source=demo&limit=100", ADMIN)).json<{
      quarantine: { eventKey: string; copies: number; bodyRetained: boolean }[];
    }>();
    const ofKey = listed.quarantine.filter((row) => row.eventKey === eventKey);
    expect(sum(ofKey.map((row) => row.copies))).toBe(N - 1);
    expect(ofKey.filter((row) => row.bodyRetained)).toHaveLength(QUARANTINE_KEPT_COPIES);
    expect((await quarantinedInStats()) - quarantinedBefore).toBe(N - 1);
    const cookie = await dashboardSession();
    const page = await (await dashboardPage("/admin/quarantine?source=demo", { headers: { cookie } })).text();
    expect(page).toContain(`${N - 1 - QUARANTINE_KEPT_COPIES} (bodies not kept)`);
  });

  it("raises the same counter row in D1 as more copies come after a relay, and a kept copy sent again adds nothing", async () => {
    const eventKey = `msg_counted_${crypto.randomUUID()}`;
    const first = await (await deliverDemo(eventKey, variant(0, 10))).json<Answer>();
    expect(first.status).toBe("accepted");
    for (let index = 1; index <= QUARANTINE_KEPT_COPIES + 2; index++) await deliverDemo(eventKey, variant(index, 10));
    await settle();
    const before = await d1Quarantine(eventKey);
    const counterId = before.find((row) => row.copies > 1)!.id;

    // A kept copy again is recognised by its hash; copies past the cap are counted as deliveries, so a resend of
    // one counts again.
    await deliverDemo(eventKey, variant(1, 10));
    await deliverDemo(eventKey, variant(QUARANTINE_KEPT_COPIES + 3, 10));
    await deliverDemo(eventKey, variant(QUARANTINE_KEPT_COPIES + 3, 10));
    await settle();
    const after = await d1Quarantine(eventKey);
    expect(after.map((row) => row.id)).toEqual(before.map((row) => row.id));
    expect(after.find((row) => row.id === counterId)?.copies).toBe(4);
    expect(sum(after.map((row) => row.copies))).toBe(QUARANTINE_KEPT_COPIES + 4);
  });

  it("decides each copy from what the key keeps", () => {
    expect(quarantineStep({ copies: 0, holdsThisHash: false })).toBe("keep-whole");
    expect(quarantineStep({ copies: QUARANTINE_KEPT_COPIES - 1, holdsThisHash: false })).toBe("keep-whole");
    expect(quarantineStep({ copies: QUARANTINE_KEPT_COPIES, holdsThisHash: false })).toBe("count-only");
    expect(quarantineStep({ copies: QUARANTINE_KEPT_COPIES, holdsThisHash: true })).toBe("already-kept");
  });
});
