import { env } from "cloudflare:workers";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { adminGet, adminPost, DASHBOARD_ORIGIN, dashboardPage, dashboardSession, seedReceipt } from "../admin/support";
import { CRON_TEST_TIMEOUT_MS, runCron, withOnlySources } from "../reconcile/support";
import { issue, received } from "./issue-support";

/**
 * Issues through the real routes: the cron (worker.scheduled) reads the dead letters per route and hands them to
 * the system monitor, which opens one issue per (kind, source, route), announces it to the three channels the
 * fixtures configure (test/fixtures/secrets/issues.json: lanes of the forward stand-in standing in for Slack, a
 * generic signed webhook and PagerDuty), and takes acknowledge and resolve through /admin/api/issues.
 */

const SOURCE = "issues-routes";
/** What this file's cron runs are given: SOURCES narrowed to SOURCE, so a run visits its shards alone. */
const CRON_ENV = withOnlySources(SOURCE);
const HOUR = 3_600_000;

async function seedDeadLetters(now: number): Promise<{ own: string; further: string }> {
  // The receipt's own delivery (route null: the source's first route, ledger) and a further route's (crm).
  const own = await seedReceipt({ source: SOURCE, receivedAt: now - HOUR, status: "dead", attempts: 5 });
  const further = await seedReceipt({ source: SOURCE, receivedAt: now - HOUR + 1, status: "processed", attempts: 1 });
  await env.DB.prepare(
    "INSERT INTO deliveries (receipt_id, route, status, attempts, last_error) VALUES (?, 'crm', 'dead', 5, 'kept failing')",
  )
    .bind(further)
    .run();
  return { own, further };
}

describe("issues", { timeout: CRON_TEST_TIMEOUT_MS }, () => {
  it("opens one issue per route for its dead letters, announces it to each channel, and takes acknowledge and resolve", async () => {
    const now = Date.now();
    const { further } = await seedDeadLetters(now);
    const crmKey = `dead-letters:${SOURCE}:crm`;
    const ledgerKey = `dead-letters:${SOURCE}:ledger`;

    await runCron(now, CRON_ENV);
    await runCron(now + 60_000, CRON_ENV);
    const open = await issue(crmKey, false);
    expect(open).toMatchObject({
      kind: "dead-letters",
      source: SOURCE,
      route: "crm",
      state: "open",
      severity: "warning",
      episodes: 1,
      message: "1 dead delivery on route crm, waiting for an operator: replay, or dismiss once the cause is fixed.",
    });
    expect(open!.history.map((entry) => entry.event)).toEqual(["opened"]);
    expect(await issue(ledgerKey)).toMatchObject({ state: "open", route: "ledger" });

    // Slack: one line of text.
    const [slack] = await received("slack", crmKey, 1);
    expect(JSON.parse(slack!.body)).toEqual({
      text: `[warning] Opened: dead-letters on ${SOURCE} / crm. ${open!.message} (issue ${crmKey})`,
    });
    // The generic webhook: signed as forwards are, verified with the Standard Webhooks library.
    const [signed] = await received("webhook", crmKey, 1);
    const verified = new Webhook(env.GATEWAY_SIGNING_SECRET).verify(signed!.body, signed!.headers) as {
      type: string;
      data: Record<string, unknown>;
    };
    expect(verified).toMatchObject({
      type: "issue.opened",
      data: {
        issueKey: crmKey,
        kind: "dead-letters",
        source: SOURCE,
        route: "crm",
        state: "open",
        severity: "warning",
      },
    });
    // PagerDuty Events v2: a trigger deduplicated on the issue key.
    const [trigger] = await received("pagerduty", crmKey, 1);
    expect(JSON.parse(trigger!.body)).toEqual({
      routing_key: "pd_routing_key_issues_stand_in",
      event_action: "trigger",
      dedup_key: crmKey,
      payload: {
        summary: `dead-letters on ${SOURCE} / crm: ${open!.message}`,
        source: "webhook-receiver",
        severity: "warning",
        component: `${SOURCE} / crm`,
        group: "dead-letters",
        custom_details: { issueKey: crmKey, state: "open", openedAt: new Date(now).toISOString() },
      },
    });

    // Acknowledge: a note is required; then PagerDuty hears "acknowledge", and a second acknowledge is refused.
    const noNote = await adminPost(`/admin/api/issues/${encodeURIComponent(crmKey)}/acknowledge`, {});
    expect(noNote.status).toBe(400);
    expect(await noNote.json()).toMatchObject({ error: { code: "note_required" } });
    const acked = await adminPost(`/admin/api/issues/${encodeURIComponent(crmKey)}/acknowledge`, {
      note: "crm is down for maintenance",
    });
    expect(acked.status).toBe(200);
    expect(await acked.json()).toMatchObject({
      issue: { state: "acknowledged", acknowledgeNote: "crm is down for maintenance" },
    });
    const again = await adminPost(`/admin/api/issues/${encodeURIComponent(crmKey)}/acknowledge`, { note: "again" });
    expect(again.status).toBe(409);
    const pagerDuty = await received("pagerduty", crmKey, 2);
    expect(JSON.parse(pagerDuty[1]!.body)).toEqual({
      routing_key: "pd_routing_key_issues_stand_in",
      event_action: "acknowledge",
      dedup_key: crmKey,
    });

    // The dead letter is dismissed through the API: the next run resolves the issue and says so everywhere.
    expect((await adminPost("/admin/api/dead/dismiss", { receiptIds: [further], route: "crm" })).status).toBe(200);
    await runCron(now + 5 * 60_000, CRON_ENV);
    expect(await issue(crmKey, false)).toBeUndefined();
    expect(await issue(crmKey)).toMatchObject({ state: "resolved", resolvedBy: "receiver" });
    expect((await issue(crmKey))!.history.map((entry) => entry.event)).toEqual(["opened", "acknowledged", "resolved"]);
    const resolved = await received("pagerduty", crmKey, 3);
    expect(JSON.parse(resolved[2]!.body)).toEqual({
      routing_key: "pd_routing_key_issues_stand_in",
      event_action: "resolve",
      dedup_key: crmKey,
    });
    const slackResolved = await received("slack", crmKey, 3);
    expect(JSON.parse(slackResolved[2]!.body).text).toMatch(
      /^\[warning\] Resolved: dead-letters on issues-routes \/ crm\./,
    );

    // Resolved by hand while its dead letter is still there: the next run opens it again, and the rate limit holds
    // the second opening notice (one per issue per 15 minutes), so the channels hear nothing new yet.
    const byHand = await adminPost(`/admin/api/issues/${encodeURIComponent(ledgerKey)}/resolve`, {});
    expect(byHand.status).toBe(200);
    expect(await byHand.json()).toMatchObject({ issue: { state: "resolved", resolvedBy: "operator" } });
    await runCron(now + 6 * 60_000, CRON_ENV);
    const reopened = await issue(ledgerKey, false);
    expect(reopened).toMatchObject({ state: "open", episodes: 2 });
    expect(reopened!.history.map((entry) => entry.event)).toEqual(["opened", "resolved", "reopened", "notice-held"]);
    expect((await received("pagerduty", ledgerKey, 2)).map((request) => JSON.parse(request.body).event_action)).toEqual(
      ["trigger", "resolve"],
    );
    // Past the interval, the held opening goes out.
    await runCron(now + 22 * 60_000, CRON_ENV);
    expect((await received("pagerduty", ledgerKey, 3)).map((request) => JSON.parse(request.body).event_action)).toEqual(
      ["trigger", "resolve", "trigger"],
    );
  });

  it("the dashboard lists an issue and acknowledges it with a plain form, refusing one without a note", async () => {
    const source = "issues-dashboard";
    const issueKey = `dead-letters:${source}:default`;
    const now = Date.now();
    await seedReceipt({ source, receivedAt: now - HOUR, status: "dead", attempts: 5 });
    await runCron(now, withOnlySources(source));
    const cookie = await dashboardSession();
    const page = await (await dashboardPage("/admin/issues", { headers: { cookie } })).text();
    expect(page).toContain(`data-issue="${issueKey}"`);
    expect(page).toContain(`action="/admin/issues/${encodeURIComponent(issueKey)}/acknowledge"`);
    const post = (body: Record<string, string>) =>
      dashboardPage(`/admin/issues/${encodeURIComponent(issueKey)}/acknowledge`, {
        method: "POST",
        body: new URLSearchParams(body),
        headers: { cookie, origin: DASHBOARD_ORIGIN, "content-type": "application/x-www-form-urlencoded" },
      });
    const refused = await post({ note: "  " });
    expect(refused.status).toBe(400);
    expect(await refused.text()).toContain("note");
    const acknowledged = await post({ note: "looking into it" });
    expect(acknowledged.status).toBe(303);
    expect(acknowledged.headers.get("location")).toBe("/admin/issues");
    const flash = acknowledged.headers.get("set-cookie")!.split(";")[0]!;
    const after = await (await dashboardPage("/admin/issues", { headers: { cookie: `${cookie}; ${flash}` } })).text();
    expect(after).toContain(`Issue ${issueKey} acknowledged.`);
    expect(after).toContain("Note: looking into it");
    expect(await issue(issueKey)).toMatchObject({ state: "acknowledged", acknowledgeNote: "looking into it" });
  });

  it("refuses an unknown issue and a bad note", async () => {
    const unknown = await adminPost("/admin/api/issues/dead-letters:nope:nope/resolve", {});
    expect(unknown.status).toBe(404);
    expect(await unknown.json()).toMatchObject({ error: { code: "issue_not_found" } });
    const badNote = await adminPost("/admin/api/issues/dead-letters:nope:nope/acknowledge", { note: 5 });
    expect(badNote.status).toBe(400);
    const extra = await adminPost("/admin/api/issues/dead-letters:nope:nope/acknowledge", { note: "x", by: "me" });
    expect(extra.status).toBe(400);
    expect((await adminGet("/admin/api/issues?all=yes")).status).toBe(400);
  });
});
