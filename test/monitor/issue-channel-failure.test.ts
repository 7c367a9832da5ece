import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it, vi } from "vitest";
import { systemMonitor } from "../../src/monitor/report";
import { dashboardPage, dashboardSession, seedReceipt } from "../admin/support";
import { CRON_TEST_TIMEOUT_MS, runCron } from "../reconcile/support";
import { eventually } from "../support/deliveries";
import { answerChannel, type ChannelName, type ChannelView, listing, received } from "./issue-support";

/**
 * A failing notice channel (docs/operating.md "Issues and notices"): the Slack stand-in answers 503 to one issue's
 * notices. The notice is retried from the system monitor's alarm with backoff, the failure shows in the API and on
 * the dashboard, the other channels get theirs at once, and once Slack answers again the next retry delivers and
 * the channel reads ok. The retry's wait is wall-clock (30 s, then 2 min): the test moves the waiting notice's due
 * time to now and runs the monitor's alarm itself, so nothing here waits on a clock.
 */

const SOURCE = "issues-channels";
const ISSUE_KEY = `dead-letters:${SOURCE}:default`;
const GIVEN_UP_SOURCE = "issues-channels-given-up";
const HOUR = 3_600_000;

type NoticeRow = {
  channel: string;
  attempts: number;
  next_attempt_at: number | null;
  last_failed_at: number | null;
  sent_at: number | null;
};

/** The monitor's notice rows for the issue, read in its own storage. */
function notices(issueKey = ISSUE_KEY): Promise<NoticeRow[]> {
  return runInDurableObject(systemMonitor(env), (_monitor, state) =>
    state.storage.sql
      .exec<NoticeRow>(
        "SELECT channel, attempts, next_attempt_at, last_failed_at, sent_at FROM issue_notices WHERE issue_key = ? ORDER BY notice_id",
        issueKey,
      )
      .toArray(),
  );
}

/** The waiting retry is due now; then the monitor's alarm (set for the retry) runs, as it would once the wait is up. */
async function runRetryNow(issueKey = ISSUE_KEY): Promise<boolean> {
  await runInDurableObject(systemMonitor(env), (_monitor, state) => {
    state.storage.sql.exec(
      "UPDATE issue_notices SET next_attempt_at = ? WHERE issue_key = ? AND next_attempt_at IS NOT NULL",
      Date.now(),
      issueKey,
    );
  });
  return runDurableObjectAlarm(systemMonitor(env));
}

async function channel(name: ChannelName): Promise<ChannelView> {
  return (await listing()).channels.find((entry) => entry.channel === name)!;
}

/** The channel's row on the dashboard's issues page, tags stripped: "slack failing 1 0 — <time>: <error>". */
async function dashboardRow(cookie: string, name: ChannelName): Promise<string> {
  const page = await (await dashboardPage("/admin/issues", { headers: { cookie } })).text();
  const row = new RegExp(`<tr data-channel="${name}">(.*?)</tr>`, "s").exec(page)?.[1];
  expect(row, `a dashboard row for ${name}`).toBeDefined();
  return row!
    .replace(/<[^>]+>/g, " ")
    .replace(/\s+/g, " ")
    .trim();
}

describe("a failing notice channel", { timeout: CRON_TEST_TIMEOUT_MS }, () => {
  it("is retried with backoff, shown failing in the API and dashboard, holds no other channel back, and recovers", async () => {
    await answerChannel("slack", 503, ISSUE_KEY);
    try {
      const now = Date.now();
      await seedReceipt({ source: SOURCE, receivedAt: now - HOUR, status: "dead", attempts: 5 });
      await runCron(now);

      // The first attempt goes out from the alarm the cron's evaluation set: Slack refuses it, the others take theirs.
      expect((await received("slack", ISSUE_KEY, 1)).map((request) => request.answer)).toEqual([503]);
      expect((await received("webhook", ISSUE_KEY, 1)).map((request) => request.answer)).toEqual([204]);
      expect((await received("pagerduty", ISSUE_KEY, 1)).map((request) => request.answer)).toEqual([204]);
      const failing = await eventually(
        async () => {
          const slack = await channel("slack");
          return slack.lastFailedAt !== null ? slack : undefined;
        },
        20_000,
        "the slack failure recorded",
      );
      expect(failing).toMatchObject({
        waiting: 1,
        gaveUp: 0,
        lastError: "slack: destination answered 503",
        lastSentAt: null,
      });
      const [slackNotice, ...others] = await notices();
      // The first retry waits 30 s after the failure.
      expect(slackNotice).toMatchObject({ channel: "slack", attempts: 1, sent_at: null });
      expect(slackNotice!.next_attempt_at! - slackNotice!.last_failed_at!).toBe(30_000);
      expect(others.map((row) => [row.channel, row.attempts, row.next_attempt_at, row.sent_at !== null])).toEqual([
        ["webhook", 1, null, true],
        ["pagerduty", 1, null, true],
      ]);
      expect(await channel("webhook")).toMatchObject({ waiting: 0, gaveUp: 0, lastError: null, lastFailedAt: null });

      const cookie = await dashboardSession();
      expect(await dashboardRow(cookie, "slack")).toMatch(/^slack failing 1 0 — .+: slack: destination answered 503$/);
      expect(await dashboardRow(cookie, "webhook")).toMatch(/^webhook ok 0 0 .+ —$/);

      // The retry, still refused: the lane sees a second request, and the next wait is 2 minutes.
      const errors: string[] = [];
      const spy = vi
        .spyOn(console, "error")
        .mockImplementation((...args: unknown[]) => void errors.push(args.map(String).join(" ")));
      expect(await runRetryNow().finally(() => spy.mockRestore())).toBe(true);
      // One error line, under its own event name (the notice's event is a field beside it, never in its place).
      expect(errors.map((line) => JSON.parse(line))).toEqual([
        {
          event: "issue.notice_failed",
          level: "error",
          error: "Error: slack: destination answered 503",
          issue: ISSUE_KEY,
          channel: "slack",
          notice: "opened",
          retry: true,
        },
      ]);
      expect((await received("slack", ISSUE_KEY, 2)).map((request) => request.answer)).toEqual([503, 503]);
      const [retried] = await notices();
      expect(retried).toMatchObject({ channel: "slack", attempts: 2, sent_at: null });
      expect(retried!.next_attempt_at! - retried!.last_failed_at!).toBe(2 * 60_000);
      expect(await channel("slack")).toMatchObject({ waiting: 1, gaveUp: 0, lastSentAt: null });

      // Slack answers again: the next retry delivers, and the channel reads ok everywhere.
      await answerChannel("slack", 200, ISSUE_KEY);
      expect(await runRetryNow()).toBe(true);
      expect((await received("slack", ISSUE_KEY, 3)).map((request) => request.answer)).toEqual([503, 503, 200]);
      const [delivered] = await notices();
      expect(delivered).toMatchObject({ channel: "slack", attempts: 3, next_attempt_at: null });
      const healthy = await channel("slack");
      expect(healthy).toMatchObject({ waiting: 0, gaveUp: 0, lastError: null });
      expect(healthy.lastSentAt).toBeGreaterThan(healthy.lastFailedAt!);
      // The last failure stays shown, when it was, and says it was recovered from (not an empty "…Z:").
      expect(await dashboardRow(cookie, "slack")).toMatch(
        /^slack ok 0 0 [-0-9]+ [0-9:]+Z [-0-9]+ [0-9:]+Z \(recovered since\)$/,
      );

      // The other channels were told once: the retries were Slack's alone.
      expect(await received("webhook", ISSUE_KEY, 1)).toHaveLength(1);
      expect(await received("pagerduty", ISSUE_KEY, 1)).toHaveLength(1);
    } finally {
      await answerChannel("slack", 0, ISSUE_KEY);
    }
  });

  it("waits 30 s, 2 min, 10 min, 30 min and 1 h between retries, then gives the notice up and shows it given up", async () => {
    const issueKey = `dead-letters:${GIVEN_UP_SOURCE}:default`;
    await answerChannel("slack", 503, issueKey);
    try {
      const now = Date.now();
      await seedReceipt({ source: GIVEN_UP_SOURCE, receivedAt: now - HOUR, status: "dead", attempts: 5 });
      await runCron(now);
      await received("slack", issueKey, 1);
      const waits: number[] = [];
      for (let attempt = 1; attempt <= 5; attempt++) {
        const [waiting] = await eventually(
          async () => {
            const rows = await notices(issueKey);
            return rows[0]?.attempts === attempt ? rows : undefined;
          },
          20_000,
          `slack attempt ${attempt} recorded`,
        );
        waits.push(waiting!.next_attempt_at! - waiting!.last_failed_at!);
        expect(await runRetryNow(issueKey)).toBe(true);
      }
      expect(waits).toEqual([30_000, 2 * 60_000, 10 * 60_000, 30 * 60_000, 60 * 60_000]);
      expect((await received("slack", issueKey, 6)).map((request) => request.answer)).toEqual([
        503, 503, 503, 503, 503, 503,
      ]);
      const [givenUp] = await notices(issueKey);
      expect(givenUp).toMatchObject({ channel: "slack", attempts: 6, next_attempt_at: null, sent_at: null });
      expect(await channel("slack")).toMatchObject({
        waiting: 0,
        gaveUp: 1,
        lastError: "slack: destination answered 503",
      });
      const cookie = await dashboardSession();
      expect(await dashboardRow(cookie, "slack")).toMatch(/^slack failing 0 1 .+: slack: destination answered 503$/);
      // Given up means no alarm is left for it: nothing more reaches the lane.
      expect(await runRetryNow(issueKey)).toBe(false);
      expect(await received("slack", issueKey, 6)).toHaveLength(6);
    } finally {
      await answerChannel("slack", 0, issueKey);
    }
  });
});
