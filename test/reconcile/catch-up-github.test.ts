import { describe, expect, it } from "vitest";
import {
  CRON_TEST_TIMEOUT_MS,
  cronRun,
  deliverLive,
  pastClock,
  standIn,
  standInRequests,
  withOnlySources,
} from "./support";

const SOURCE = "reconcile-github";
const HOOK = "/repos/acme/shop/hooks/4242";

function delivery(id: number, guid: string, deliveredAt: number, statusCode: number, redelivery = false) {
  return {
    id,
    guid,
    delivered_at: new Date(deliveredAt).toISOString(),
    redelivery,
    duration: 0.27,
    status: statusCode === 0 ? "timed out" : statusCode < 300 ? "OK" : `Invalid HTTP Response: ${statusCode}`,
    status_code: statusCode,
    event: "push",
    action: null,
    installation_id: null,
    repository_id: 1296269,
  };
}

describe("GitHub catch-up", { timeout: CRON_TEST_TIMEOUT_MS }, () => {
  it("asks GitHub to redeliver failed deliveries we never stored, and nothing else", async () => {
    const now = pastClock();
    // Delivery ids are unique to this run: the stand-in is shared and never reset.
    const base = Math.floor(Math.random() * 1e9) * 100;
    const guid = (name: string) => `${name}-${base}`;
    const minutesAgo = (minutes: number) => now - minutes * 60_000;
    await standIn(SOURCE, "github-deliveries", [
      delivery(base + 1, guid("never-received"), minutesAgo(20), 502),
      delivery(base + 2, guid("redelivered-ok"), minutesAgo(30), 0),
      delivery(base + 3, guid("redelivered-ok"), minutesAgo(25), 200, true),
      delivery(base + 4, guid("stored-but-timed-out"), minutesAgo(15), 0),
      delivery(base + 5, guid("delivered"), minutesAgo(10), 200),
      // Outside the first run's look-back window: not ours to chase.
      delivery(base + 6, guid("too-old"), now - 2 * 86_400_000, 500),
      // Failed, and failed again on three redeliveries: we stop asking and leave it to a human.
      delivery(base + 8, guid("given-up"), minutesAgo(40), 500),
      delivery(base + 9, guid("given-up"), minutesAgo(35), 500, true),
      delivery(base + 10, guid("given-up"), minutesAgo(30), 500, true),
      delivery(base + 11, guid("given-up"), minutesAgo(25), 500, true),
    ]);
    // We stored this one; GitHub recorded a timeout because our answer came too late.
    expect((await deliverLive(SOURCE, guid("stored-but-timed-out"), JSON.stringify({ zen: "ok" }))).status).toBe(200);

    const run = await cronRun(now, withOnlySources(SOURCE));
    expect(run.failures).toBeNull();
    const ours = async () =>
      (await standInRequests(SOURCE)).filter(
        (request) =>
          request.method === "POST" &&
          Array.from({ length: 11 }, (_, n) => `${HOOK}/deliveries/${base + n + 1}/attempts`).includes(request.path),
      );
    const redeliveries = await ours();
    expect(run.counts.catchUp[SOURCE]).toMatchObject({ redeliveriesRequested: 1, redeliveriesWithheld: 1 });
    expect(redeliveries.map((request) => request.path)).toEqual([`${HOOK}/deliveries/${base + 1}/attempts`]);
    expect(redeliveries[0]!.headers).toMatchObject({
      authorization: "Bearer ghp_reconcile_stand_in",
      accept: "application/vnd.github+json",
      "x-github-api-version": "2022-11-28",
    });

    // GitHub redelivers it (same GUID) and lists the successful attempt; the next run asks for nothing more.
    expect((await deliverLive(SOURCE, guid("never-received"), JSON.stringify({ zen: "redelivered" }))).status).toBe(
      200,
    );
    await standIn(SOURCE, "github-deliveries", [delivery(base + 7, guid("never-received"), now + 60_000, 200, true)]);
    const second = await cronRun(now + 5 * 60_000, withOnlySources(SOURCE));
    expect(second.failures).toBeNull();
    expect(await ours()).toHaveLength(1);
  });
});
