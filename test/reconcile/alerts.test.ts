import { env } from "cloudflare:workers";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { claimEvent } from "../../src/claims/claim-event";
import { utf8Bytes } from "../../src/crypto/encoding";
import { ulid } from "../../src/lib/ulid";
import { loadSources } from "../../src/sources/registry";
import { eventually } from "../support/deliveries";
import {
  CRON_TEST_TIMEOUT_MS,
  cronRun,
  deliverLive,
  receipt,
  runCron,
  runsAt,
  standInRequests,
  unique,
  withOnlySources,
} from "./support";

const SOURCE = "reconcile-quiet";
const HOUR = 3_600_000;

async function silenceAlerts() {
  const rows = await env.DB.prepare(
    "SELECT id AS alertId, state, opened_at AS openedAt, resolved_at AS resolvedAt FROM alerts WHERE source = ? AND kind = 'silence' ORDER BY opened_at",
  )
    .bind(SOURCE)
    .all<{ alertId: string; state: string; openedAt: number; resolvedAt: number | null }>();
  return rows.results;
}

/** Notices the alert webhook stand-in received for one alert, verified with the Standard Webhooks library. */
async function noticesFor(alertId: string) {
  const signer = new Webhook(env.GATEWAY_SIGNING_SECRET);
  return (await standInRequests("alerts"))
    .filter((request) => request.headers["webhook-id"]?.startsWith(`${alertId}.`))
    .map(
      (request) =>
        signer.verify(request.body, request.headers) as { type: string; data: { source: string; kind: string } },
    );
}

// Each test's cron runs see its own source alone (withOnlySources): the watch's verdicts are per source, and a run
// over every fixture source visits hundreds of cold claim shards.
describe("alerts", { timeout: CRON_TEST_TIMEOUT_MS }, () => {
  it("raises one alert for a silent source across runs, sends it once, and resolves when traffic returns", async () => {
    const now = Date.now();
    const only = withOnlySources(SOURCE);
    const lastKey = `msg_before_silence_${unique()}`;
    // The source's last live delivery was two hours ago; it expects one within the hour.
    await claimEvent(env, {
      source: loadSources(env).get(SOURCE)!,
      identity: {
        eventKey: lastKey,
        eventKeyOrigin: "provider-id",
        eventKeySigned: true,
        eventType: "thing.happened",
        subjectId: null,
        version: null,
        occurredAt: null,
      },
      rawBody: utf8Bytes("{}"),
      keptHeaders: {},
      receivedAt: now - 2 * HOUR,
      provenance: "live",
    });
    await eventually(async () => ((await receipt(SOURCE, lastKey)) ? true : undefined));

    const first = await cronRun(now, only);
    expect(first.failures).toBeNull();
    await cronRun(now + 5 * 60_000, only);
    await cronRun(now + 10 * 60_000, only);
    const open = await silenceAlerts();
    expect(open).toHaveLength(1);
    expect(open[0]).toMatchObject({ state: "open", openedAt: now });
    const alertId = open[0]!.alertId;
    expect(await noticesFor(alertId)).toEqual([
      expect.objectContaining({
        type: "alert.opened",
        data: expect.objectContaining({ source: SOURCE, kind: "silence" }),
      }),
    ]);

    const back = await deliverLive(SOURCE, `msg_back_${unique()}`, JSON.stringify({ type: "thing.happened" }));
    expect(back.status).toBe(200);
    await cronRun(now + 15 * 60_000, only);
    await cronRun(now + 20 * 60_000, only);
    expect(await silenceAlerts()).toEqual([
      expect.objectContaining({ alertId, state: "resolved", resolvedAt: now + 15 * 60_000 }),
    ]);
    expect((await noticesFor(alertId)).map((notice) => notice.type)).toEqual(["alert.opened", "alert.resolved"]);
  });

  it("opens dead-letter and backlog incidents once, and resolves them when the work is dealt with", async () => {
    const source = "reconcile-stuck";
    const only = withOnlySources(source);
    const now = Date.now();
    const insert = (eventKey: string, status: string, receivedAt: number, nextAttemptAt: number | null) =>
      env.DB.prepare(
        `INSERT INTO receipts (id, source, event_key, payload_sha256, received_at, relayed_at, status, next_attempt_at, attempts)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, 3)`,
      )
        .bind(ulid(receivedAt), source, eventKey, "0".repeat(64), receivedAt, receivedAt, status, nextAttemptAt)
        .run();
    const incidents = async (kind: string) =>
      (
        await env.DB.prepare("SELECT id AS alertId, state FROM alerts WHERE source = ? AND kind = ?")
          .bind(source, kind)
          .all<{ alertId: string; state: string }>()
      ).results;

    await cronRun(now, only); // the baseline: nothing dead yet
    const dead = `msg_dead_${unique()}`;
    const retrying = `msg_retrying_${unique()}`;
    await insert(dead, "dead", now - HOUR, null);
    // Received two hours ago and still waiting on its next retry: older than alert_pending_after (1 h).
    await insert(retrying, "pending", now - 2 * HOUR, now + HOUR);

    await cronRun(now + 60_000, only);
    await cronRun(now + 120_000, only);
    expect(await incidents("dead-letters")).toEqual([expect.objectContaining({ state: "open" })]);
    expect(await incidents("pending-age")).toEqual([expect.objectContaining({ state: "open" })]);
    const detail = await env.DB.prepare("SELECT detail FROM alerts WHERE source = ? AND kind = 'dead-letters'")
      .bind(source)
      .first<{ detail: string }>();
    expect(detail?.detail).toContain("1 dead delivery (was 0)");

    // Replayed and finished: both incidents resolve, each announced once each way.
    await env.DB.prepare("UPDATE receipts SET status = 'processed' WHERE source = ? AND event_key IN (?, ?)")
      .bind(source, dead, retrying)
      .run();
    await cronRun(now + 180_000, only);
    for (const kind of ["dead-letters", "pending-age"]) {
      const [incident] = await incidents(kind);
      expect(incident?.state).toBe("resolved");
      expect((await noticesFor(incident!.alertId)).map((notice) => notice.type)).toEqual([
        "alert.opened",
        "alert.resolved",
      ]);
    }
  });

  it("keeps a notice the alert webhook did not take, and sends it on a later run", async () => {
    const source = "reconcile-retention";
    const only = withOnlySources(source);
    const now = Date.now();
    await cronRun(now, only); // baseline
    await env.DB.prepare(
      `INSERT INTO receipts (id, source, event_key, payload_sha256, received_at, relayed_at, status, attempts)
       VALUES (?, ?, ?, ?, ?, ?, 'dead', 1)`,
    )
      .bind(ulid(now), source, `msg_dead_${unique()}`, "0".repeat(64), now, now)
      .run();

    // Nothing listens on this port (in the reconciler's test range): the POST is refused.
    const unreachable = { ...only, ALERT_WEBHOOK_URL: "http://127.0.0.1:8809/alerts" };
    await runCron(now + 60_000, unreachable);
    const [failedRun] = await runsAt(now + 60_000);
    expect(failedRun?.counts.alerts.notices.failed).toBeGreaterThanOrEqual(1);
    const alert = await env.DB.prepare(
      "SELECT id AS alertId, notified_at AS notifiedAt FROM alerts WHERE source = ? AND kind = 'dead-letters'",
    )
      .bind(source)
      .first<{ alertId: string; notifiedAt: number | null }>();
    expect(alert).toMatchObject({ notifiedAt: null });
    expect(await noticesFor(alert!.alertId)).toEqual([]);

    await cronRun(now + 120_000, only);
    await cronRun(now + 180_000, only);
    expect((await noticesFor(alert!.alertId)).map((notice) => notice.type)).toEqual(["alert.opened"]);
  });
});
