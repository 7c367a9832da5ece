import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { claimEvent } from "../../src/claims/claim-event";
import { utf8Bytes } from "../../src/crypto/encoding";
import { ulid } from "../../src/lib/ulid";
import { loadSources } from "../../src/sources/registry";
import { eventually, waitForStatus } from "../support/deliveries";
import {
  CRON_TEST_TIMEOUT_MS,
  pastClock,
  receipt,
  runCron,
  runsAt,
  standIn,
  standInRequests,
  stripeEvent,
  unique,
  withOnlySources,
} from "./support";

const SOURCE = "reconcile-overlap";
const MINUTE = 60_000;
const DAY = 86_400_000;

async function claimAgo(eventKey: string, ageMs: number, now: number) {
  const event = stripeEvent(eventKey, now - ageMs, `in_${eventKey}`);
  return claimEvent(env, {
    source: loadSources(env).get(SOURCE)!,
    identity: {
      eventKey,
      eventKeyOrigin: "provider-id",
      eventKeySigned: true,
      eventType: event.type,
      subjectId: event.data.object.id,
      version: null,
      occurredAt: null,
    },
    rawBody: utf8Bytes(JSON.stringify(event, null, 2)),
    keptHeaders: { "content-type": "application/json" },
    receivedAt: now - ageMs,
    provenance: "live",
  });
}

async function forwardsOf(eventKey: string) {
  return (await standInRequests(SOURCE)).filter(
    (request) => request.path === "/sink" && request.headers["x-webhook-event-key"] === eventKey,
  );
}

async function alertCount(kind: string): Promise<number> {
  const row = await env.DB.prepare("SELECT COUNT(*) AS n FROM alerts WHERE source = ? AND kind = ?")
    .bind(SOURCE, kind)
    .first<{ n: number }>();
  return row?.n ?? 0;
}

describe("overlapping runs", { timeout: CRON_TEST_TIMEOUT_MS }, () => {
  it("two runs at once do every piece of work once", async () => {
    const tag = unique();
    const now = pastClock();
    const omitted = stripeEvent(`evt_overlap_${tag}`, now - 2 * MINUTE, `in_overlap_${tag}`);
    await standIn(SOURCE, "stripe-events", [omitted]);
    // Last live delivery two hours ago (silence), one 36 days ago (retention), and a consumer that died mid-lease.
    const lastLive = `evt_last_live_${tag}`;
    const ancient = `evt_ancient_${tag}`;
    await claimAgo(lastLive, 2 * 60 * MINUTE, now);
    await claimAgo(ancient, 36 * DAY, now);
    await waitForStatus(SOURCE, lastLive);
    await waitForStatus(SOURCE, ancient);
    const leased = `evt_leased_${tag}`;
    // Received three hours ago (before the silence began), on its second try (a leased retry, so in the retry
    // index) when its consumer died.
    const leasedId = ulid(now - 180 * MINUTE);
    await env.DB.prepare(
      `INSERT INTO receipts (id, source, event_key, payload_sha256, body, received_at, relayed_at, status, next_attempt_at, lease_until, attempts, lease_generation)
       VALUES (?, ?, ?, ?, ?, ?, ?, 'processing', ?, ?, 1, 2)`,
    )
      .bind(
        leasedId,
        SOURCE,
        leased,
        "0".repeat(64),
        utf8Bytes("{}"),
        now - 180 * MINUTE,
        now - 180 * MINUTE,
        now - 10 * MINUTE,
        now - MINUTE,
      )
      .run();

    await Promise.all([runCron(now, withOnlySources(SOURCE)), runCron(now, withOnlySources(SOURCE))]);

    const runs = await runsAt(now);
    expect(runs).toHaveLength(2);
    expect(runs.map((run) => run.failures)).toEqual([null, null]);

    // Catch-up: both runs listed the omitted event; one claim was accepted, one effect reached the destination.
    expect(await waitForStatus(SOURCE, omitted.id)).toBe("processed");
    expect((await receipt(SOURCE, omitted.id))?.provenance).toBe("reconciled");
    // Expired lease: returned once, attempted once more. Counted, not only inferred from the effect: the commit
    // guard would absorb a second return, so only the runs' own counts show that one run alone took it.
    expect(runs.reduce((sum, run) => sum + run.counts.redrive.expiredLeasesReturned, 0)).toBe(1);
    expect(await waitForStatus(SOURCE, leased)).toBe("processed");
    await eventually(async () =>
      (await forwardsOf(omitted.id)).length > 0 && (await forwardsOf(leased)).length > 0 ? true : undefined,
    );
    expect(await forwardsOf(omitted.id)).toHaveLength(1);
    expect(await forwardsOf(leased)).toHaveLength(1);
    const leasedAttempts = await env.DB.prepare("SELECT COUNT(*) AS n FROM attempts WHERE receipt_id = ?")
      .bind(leasedId)
      .first<{ n: number }>();
    expect(leasedAttempts?.n).toBe(1);

    // Alerts: one incident each, announced once.
    expect(await alertCount("silence")).toBe(1);
    expect(await alertCount("catch-up-missing")).toBe(1);
    const alertIds = await env.DB.prepare("SELECT id AS alertId FROM alerts WHERE source = ?")
      .bind(SOURCE)
      .all<{ alertId: string }>();
    const notices = (await standInRequests("alerts")).filter((request) =>
      alertIds.results.some((alert) => request.headers["webhook-id"] === `${alert.alertId}.opened`),
    );
    expect(notices).toHaveLength(alertIds.results.length);

    // Retention: the 36-day-old key is gone, once.
    expect(await receipt(SOURCE, ancient)).toBeNull();
    expect(runs.reduce((sum, run) => sum + run.counts.retention.keysExpired, 0)).toBeGreaterThanOrEqual(1);
  });
});
