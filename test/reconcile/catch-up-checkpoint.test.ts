import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { ScanCheckpoint } from "../../src/reconcile/catch-up/scan";
import { eventually } from "../support/deliveries";
import { CRON_TEST_TIMEOUT_MS, cronRun, pastClock, standIn, stripeEvent, unique, withOnlySources } from "./support";

// max_pages = 1: one page of 100 per run, so a longer list takes several runs.
const SOURCE = "reconcile-stripe-paged";
/** What this file's cron runs are given: SOURCES narrowed to SOURCE, so a run visits its shards alone. */
const CRON_ENV = withOnlySources(SOURCE);

async function checkpoint(): Promise<ScanCheckpoint | null> {
  const row = await env.DB.prepare("SELECT cursor FROM checkpoints WHERE source = ? AND reconciler = 'stripe-events'")
    .bind(SOURCE)
    .first<{ cursor: string }>();
  return row ? (JSON.parse(row.cursor) as ScanCheckpoint) : null;
}

async function storedCount(eventKeys: string[]): Promise<number> {
  const row = await env.DB.prepare(
    "SELECT COUNT(*) AS n FROM receipts WHERE source = ? AND event_key IN (SELECT value FROM json_each(?))",
  )
    .bind(SOURCE, JSON.stringify(eventKeys))
    .first<{ n: number }>();
  return row?.n ?? 0;
}

describe("the Stripe catch-up checkpoint", { timeout: CRON_TEST_TIMEOUT_MS }, () => {
  it("records each completed page, resumes a cut-short scan, and stays put when the API fails", async () => {
    const tag = unique();
    const now = pastClock();
    const events = Array.from({ length: 150 }, (_, n) =>
      stripeEvent(`evt_page_${tag}_${String(n).padStart(3, "0")}`, now - 5 * 60_000 + n * 1000, `in_${tag}_${n}`),
    );
    await standIn(SOURCE, "stripe-events", events);
    const eventKeys = events.map((event) => event.id);

    // First run: one page, the scan is cut short, and the checkpoint records how far it got.
    const first = await cronRun(now, CRON_ENV);
    expect(first.failures).toBeNull();
    expect(first.counts.catchUp[SOURCE]).toMatchObject({ pages: 1, completed: false, listed: 100 });
    const partial = await checkpoint();
    expect(partial?.inProgress).toMatchObject({ startedAt: now });
    // Newest first: the page ended at the 100th newest event, which is where the next page starts after.
    expect(partial?.inProgress?.cursor).toBe(eventKeys[50]);
    await eventually(async () => ((await storedCount(eventKeys.slice(50))) === 100 ? true : undefined));
    expect(await storedCount(eventKeys.slice(0, 50))).toBe(0);

    // Later runs resume the same scan until it reaches its lower bound; only then does `since` move, to the
    // moment the scan began.
    let clock = now;
    for (let run = 0; run < 10 && (await checkpoint())?.inProgress; run++) {
      clock += 5 * 60_000;
      expect((await cronRun(clock, CRON_ENV)).failures).toBeNull();
    }
    expect(await checkpoint()).toEqual({ since: now });
    await eventually(async () => ((await storedCount(eventKeys)) === 150 ? true : undefined));

    // The API fails: the run records it and the checkpoint does not move. The outage answers only this run's scan
    // (the one beginning at its clock): other test files' cron runs list this namespace too, at the same time.
    const failingClock = clock + 5 * 60_000;
    await standIn(SOURCE, "fail-with", { status: 503, until: Math.floor(failingClock / 1000) });
    try {
      const failed = await cronRun(failingClock, CRON_ENV);
      expect(failed.failures).toEqual([
        expect.objectContaining({
          step: "catch-up",
          source: SOURCE,
          error: expect.stringContaining("stripe API answered 503"),
        }),
      ]);
      expect(await checkpoint()).toEqual({ since: now });
    } finally {
      await standIn(SOURCE, "fail-with", { status: null });
    }
  });
});
