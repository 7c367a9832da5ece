import { env, exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { moveDeadLetters } from "../../src/admin/actions/dismiss";
import { claimEvent } from "../../src/claims/claim-event";
import { shardFor } from "../../src/claims/routing";
import { utf8Bytes } from "../../src/crypto/encoding";
import { replayReceipt } from "../../src/replay/replay-receipts";
import { loadSources } from "../../src/sources/registry";
import { adminGet } from "../admin/support";
import { eventually, waitForStatus } from "../support/deliveries";
import { CRON_TEST_TIMEOUT_MS, cronRun, cronUntil, deliverLive, receipt, unique, withOnlySources } from "./support";

const SOURCE = "reconcile-retention";
/** What this file's cron runs are given: SOURCES narrowed to SOURCE, so a run visits its shards alone. */
const CRON_ENV = withOnlySources(SOURCE);
const DAY = 86_400_000;

/** A delivery claimed through the real claim path as if it had arrived `ageMs` ago. */
async function receivedAgo(eventKey: string, body: string, ageMs: number, now: number) {
  const source = loadSources(env).get(SOURCE)!;
  return claimEvent(env, {
    source,
    identity: {
      eventKey,
      eventKeyOrigin: "provider-id",
      eventKeySigned: true,
      eventType: "thing.happened",
      subjectId: null,
      version: null,
      occurredAt: null,
    },
    rawBody: utf8Bytes(body),
    keptHeaders: { "content-type": "application/json" },
    receivedAt: now - ageMs,
    provenance: "live",
  });
}

/** "committed": receipts of this key whose outcome committed (the one-effect guard); "attempts": their attempt rows. */
async function rowCount(what: "committed" | "attempts", eventKey: string): Promise<number> {
  const query =
    what === "committed"
      ? "SELECT COUNT(*) AS n FROM receipts WHERE source = ? AND event_key = ? AND committed_at IS NOT NULL"
      : "SELECT COUNT(*) AS n FROM attempts WHERE receipt_id IN (SELECT id FROM receipts WHERE source = ? AND event_key = ?)";
  const row = await env.DB.prepare(query).bind(SOURCE, eventKey).first<{ n: number }>();
  return row?.n ?? 0;
}

const tombstone = (eventKey: string) => shardFor(env, SOURCE, eventKey).tombstone(SOURCE, eventKey);

describe("retention", { timeout: CRON_TEST_TIMEOUT_MS }, () => {
  it("drops bodies after payload retention, keys after dedupe retention, and never unfinished work", async () => {
    const tag = unique();
    const now = Date.now();
    const body = (name: string) => JSON.stringify({ type: "thing.happened", data: { name, tag } });
    const weekOld = `msg_week_${tag}`;
    const justInside = `msg_34d_${tag}`;
    const expired = `msg_36d_${tag}`;
    const stillPending = `msg_36d_pending_${tag}`;
    await receivedAgo(weekOld, body("week"), 8 * DAY, now);
    await receivedAgo(justInside, body("34d"), 34 * DAY, now);
    await receivedAgo(expired, body("36d"), 36 * DAY, now);
    await receivedAgo(stillPending, body("pending"), 36 * DAY, now);
    for (const eventKey of [weekOld, justInside, expired, stillPending])
      expect(await waitForStatus(SOURCE, eventKey)).toBe("processed");
    expect(await rowCount("committed", expired)).toBe(1);
    // A receipt still waiting on a long retry is not terminal, however old.
    await env.DB.prepare(
      "UPDATE receipts SET status = 'pending', next_attempt_at = ? WHERE source = ? AND event_key = ?",
    )
      .bind(now + DAY, SOURCE, stillPending)
      .run();
    expect(await tombstone(expired)).not.toBeNull();
    // The cron's own history is kept 35 days too.
    const oldRunId = `old_run_${tag}`;
    await env.DB.prepare("INSERT INTO reconcile_runs (id, clock, started_at) VALUES (?, ?, ?)")
      .bind(oldRunId, now - 36 * DAY, now - 36 * DAY)
      .run();

    const runs = await cronUntil(now, async () => (await receipt(SOURCE, expired)) === null, 40, CRON_ENV);
    expect(runs.every((run) => run.failures === null)).toBe(true);
    expect(runs.reduce((sum, run) => sum + run.counts.retention.bodiesDropped, 0)).toBeGreaterThanOrEqual(2);
    expect(runs.reduce((sum, run) => sum + run.counts.retention.keysExpired, 0)).toBeGreaterThanOrEqual(1);

    // Past payload retention: body gone, keyed tombstone (key + hash) and the one-effect guard kept.
    for (const eventKey of [weekOld, justInside]) {
      const kept = await receipt(SOURCE, eventKey);
      expect(kept).toMatchObject({ status: "processed", hasBody: 0, keptHeaders: null });
      expect(await rowCount("committed", eventKey)).toBe(1);
      expect(await tombstone(eventKey)).toMatchObject({ relayed: true, hasBody: false });
    }
    // Past dedupe retention: the receipt (guard included) and its attempts are gone from D1. The shard forgets its
    // copy of the key with the key's whole time partition, once every claim in it is past retention (below).
    expect(await receipt(SOURCE, expired)).toBeNull();
    expect(await rowCount("committed", expired)).toBe(0);
    expect(await rowCount("attempts", expired)).toBe(0);
    expect(await env.DB.prepare("SELECT id FROM reconcile_runs WHERE id = ?").bind(oldRunId).first()).toBeNull();
    // Unfinished work keeps its body and key whatever its age, in D1 and in its shard: a resend is still a duplicate.
    expect(await receipt(SOURCE, stillPending)).toMatchObject({ status: "pending", hasBody: 1 });
    expect(await tombstone(stillPending)).toMatchObject({ relayed: true });
    const pendingResend = await deliverLive(SOURCE, stillPending, body("pending"));
    expect(await pendingResend.json()).toEqual({
      status: "duplicate",
      receipt: (await receipt(SOURCE, stillPending))?.receiptId,
    });

    // A resend after the body is gone is still recognised by its key and hash.
    const resend = await deliverLive(SOURCE, weekOld, body("week"));
    expect(resend.status).toBe(200);
    expect(await resend.json()).toEqual({ status: "duplicate", receipt: (await receipt(SOURCE, weekOld))?.receiptId });

    // Once every claim its shard partition holds is past retention (here: a cutoff after all of this test's claims;
    // the cron's within two windows of the key), the expired key is gone from the shard; the unfinished one stays.
    const expiredShard = shardFor(env, SOURCE, expired);
    await expiredShard.relay();
    await expiredShard.pruneKeys(Date.now() + 1, [stillPending]);
    expect(await tombstone(expired)).toBeNull();
    const stillPendingShard = shardFor(env, SOURCE, stillPending);
    await stillPendingShard.pruneKeys(Date.now() + 1, [stillPending]);
    expect(await tombstone(stillPending)).toMatchObject({ relayed: true });
  });

  it("keeps quarantine evidence until dedupe retention, its body only until payload retention", async () => {
    const tag = unique();
    const now = Date.now();
    const body = (name: string, copy: string) => JSON.stringify({ type: "thing.happened", data: { name, copy, tag } });
    const weekOld = `msg_q_week_${tag}`;
    const expired = `msg_q_36d_${tag}`;
    for (const [eventKey, ageMs] of [
      [weekOld, 8 * DAY],
      [expired, 36 * DAY],
    ] as const) {
      await receivedAgo(eventKey, body(eventKey, "original"), ageMs, now);
      // Same key, other bytes: quarantined, received as long ago as the original.
      expect((await receivedAgo(eventKey, body(eventKey, "changed"), ageMs, now)).disposition).toBe("quarantined");
    }
    const evidence = (eventKey: string) =>
      env.DB.prepare(
        "SELECT body IS NOT NULL AS hasBody, kept_headers AS keptHeaders FROM quarantine WHERE source = ? AND event_key = ?",
      )
        .bind(SOURCE, eventKey)
        .first<{ hasBody: number; keptHeaders: string | null }>();
    for (const eventKey of [weekOld, expired]) {
      expect(
        await eventually(
          async () => (await evidence(eventKey)) ?? undefined,
          15_000,
          `quarantine of ${eventKey} in D1`,
        ),
      ).toMatchObject({ hasBody: 1 });
    }

    const run = await cronRun(now, CRON_ENV);
    expect(run.failures).toBeNull();
    // Past payload retention only: the evidence stays (a human may still look at it), without its bytes.
    expect(await evidence(weekOld)).toEqual({ hasBody: 0, keptHeaders: null });
    // Past dedupe retention: gone, like the key it was evidence about.
    expect(await evidence(expired)).toBeNull();
  });

  it("keeps a dead letter's body for dead-letter retention, and hands it back to payload retention once dismissed or replayed", async () => {
    const tag = unique();
    const now = Date.now();
    const deadLetterRetentionMs = loadSources(env).get(SOURCE)!.deadLetterRetentionMs;
    expect(deadLetterRetentionMs).toBe(20 * DAY); // this source's dead_letter_retention (test/fixtures/sources/reconcile.json)
    const kept = `msg_dead_kept_${tag}`;
    const dismissed = `msg_dead_dismissed_${tag}`;
    const replayed = `msg_dead_replayed_${tag}`;
    const pastItsRetention = `msg_dead_25d_${tag}`;
    const ages = { [kept]: 8 * DAY, [dismissed]: 8 * DAY, [replayed]: 8 * DAY, [pastItsRetention]: 25 * DAY };
    for (const [eventKey, ageMs] of Object.entries(ages))
      await receivedAgo(eventKey, JSON.stringify({ type: "thing.happened", data: { eventKey } }), ageMs, now);
    for (const eventKey of Object.keys(ages)) {
      expect(await waitForStatus(SOURCE, eventKey)).toBe("processed");
      // As the consumer leaves a delivery that ran out of retries.
      await env.DB.prepare(
        "UPDATE receipts SET status = 'dead', last_error = 'destination kept failing' WHERE source = ? AND event_key = ?",
      )
        .bind(SOURCE, eventKey)
        .run();
    }

    // Past payload retention (7 days): every dead letter inside its own retention keeps its body, so it can be replayed.
    expect((await cronRun(now, CRON_ENV)).failures).toBeNull();
    for (const eventKey of [kept, dismissed, replayed])
      expect(await receipt(SOURCE, eventKey), eventKey).toMatchObject({ status: "dead", hasBody: 1 });
    expect(await receipt(SOURCE, pastItsRetention)).toMatchObject({ status: "dead", hasBody: 0, keptHeaders: null });
    expect(await tombstone(pastItsRetention)).not.toBeNull();

    // The admin API and the dashboard say when it goes.
    const keptReceipt = (await receipt(SOURCE, kept))!;
    const detail = await (await adminGet(`/admin/api/receipts/${keptReceipt.receiptId}`)).json<{
      receipt: { bodyDropsAt: number | null };
    }>();
    expect(detail.receipt.bodyDropsAt).toBe(keptReceipt.receivedAt + 20 * DAY);
    const expiredReceipt = (await receipt(SOURCE, pastItsRetention))!;
    expect(
      (
        await (
          await adminGet(`/admin/api/receipts/${expiredReceipt.receiptId}`)
        ).json<{ receipt: { bodyDropsAt: number | null } }>()
      ).receipt.bodyDropsAt,
    ).toBeNull();
    const session = (
      await exports.default.fetch(
        new Request("https://receiver.test/admin/login", {
          method: "POST",
          body: new URLSearchParams({ token: env.ADMIN_TOKEN }),
          headers: { "content-type": "application/x-www-form-urlencoded", origin: "https://receiver.test" },
          redirect: "manual",
        }),
      )
    ).headers
      .get("set-cookie")!
      .split(";")[0]!;
    const receiptPage = await (
      await exports.default.fetch(
        new Request(`https://receiver.test/admin/receipts/${keptReceipt.receiptId}`, { headers: { cookie: session } }),
      )
    ).text();
    const dropsAt = new Date(keptReceipt.receivedAt + 20 * DAY)
      .toISOString()
      .replace("T", " ")
      .replace(/\.\d+Z$/, "Z");
    expect(receiptPage).toMatch(new RegExp(`id="body-drops-at"[^>]*>Kept until ${dropsAt} \\(dead-letter retention`));

    // Dismissed, or replayed and finished: the body goes at payload retention, though the scan went past it as a dead letter.
    expect(
      (await moveDeadLetters(env, "dismiss", [(await receipt(SOURCE, dismissed))!.receiptId])).changed,
    ).toHaveLength(1);
    expect((await replayReceipt(env, (await receipt(SOURCE, replayed))!.receiptId)).kind).toBe("replayed");
    expect(await waitForStatus(SOURCE, replayed)).toBe("processed");
    expect((await cronRun(now + 1, CRON_ENV)).failures).toBeNull();
    expect(await receipt(SOURCE, dismissed)).toMatchObject({ status: "dismissed", hasBody: 0, keptHeaders: null });
    expect(await receipt(SOURCE, replayed)).toMatchObject({ status: "processed", hasBody: 0, keptHeaders: null });
    expect(await receipt(SOURCE, kept)).toMatchObject({ status: "dead", hasBody: 1 });
  });
});
