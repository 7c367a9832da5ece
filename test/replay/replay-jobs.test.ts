import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { processReceipt } from "../../src/consumers/receipts/process";
import { type JobRow, stepJob } from "../../src/replay/replay-job-step";
import { advanceJobs } from "../../src/replay/replay-jobs";
import { adminGet, adminPost, DASHBOARD_ORIGIN, dashboardPage, dashboardSession } from "../admin/support";
import { envWithSources, receiptRow, seedReceipt } from "../consumers/support/processing";
import { deliveryRow, keysOf, lane, sendCredit, setLane } from "../routing/gate-support";
import { eventually } from "../support/deliveries";

/**
 * Bulk replay jobs by filter (docs/operating.md, "Bulk replay by filter"), through the real pipeline: signed events
 * posted to /webhooks/replay-jobs (test/fixtures/sources/replay-jobs.json), forwarded to lanes of the Node stand-in,
 * the job started and read through /admin/api/replays. Each test's filter starts at its own start (`since`), so the
 * tests never see each other's receipts.
 */

const SOURCE = "replay-jobs";
/** A delivery's id at the destination is `<receipt id>:<route>` for a source with several routes. */
const ROUTES = (env.SOURCES as Record<string, { routes: unknown[] }>)[SOURCE]!.routes;
const receiptOf = (key: string | undefined) => key?.split(":")[0] ?? "";

interface JobAnswer {
  job: { jobKey: string; state: string; replayed: number; scanned: number; origin: string };
}

async function deadOnMain(count: number, account: string): Promise<string[]> {
  await setLane("rj-main", 400);
  const receiptIds: string[] = [];
  for (let n = 0; n < count; n++) receiptIds.push(await sendCredit(SOURCE, { account, amount: n }));
  await eventually(
    async () =>
      (await Promise.all(receiptIds.map(receiptRow))).every((row) => row.status === "dead") ? true : undefined,
    30_000,
    "every receipt dead",
  );
  await setLane("rj-main", 204);
  return receiptIds;
}

async function processed(
  receiptIds: readonly string[],
  read: (receiptId: string) => Promise<string | undefined> = async (receiptId) => (await receiptRow(receiptId)).status,
) {
  await eventually(
    async () =>
      (await Promise.all(receiptIds.map(read))).every((status) => status === "processed") ? true : undefined,
    30_000,
    "every delivery processed",
  );
}

describe("replay jobs", () => {
  it("a dry run counts and samples without replaying; the job replays each dead letter once, and again changes nothing", {
    timeout: 120_000,
  }, async () => {
    const since = Date.now();
    const dead = await deadOnMain(3, "acct_dry");
    const filter = { source: SOURCE, status: "dead", since: new Date(since).toISOString() };

    const dry = await adminPost("/admin/api/replays", { filter, dryRun: true });
    expect(dry.status).toBe(200);
    expect(await dry.json()).toMatchObject({
      dryRun: true,
      count: 3,
      complete: true,
      sample: dead.map((receiptId) => ({ receiptId, kind: "receipt" })),
    });
    for (const receiptId of dead) expect(await receiptRow(receiptId)).toMatchObject({ status: "dead", replayCount: 0 });

    const started = await adminPost("/admin/api/replays", { filter, jobKey: "rj-dry-once" });
    expect(started.status).toBe(202);
    expect((await started.json<JobAnswer>()).job).toMatchObject({ jobKey: "rj-dry-once", state: "done", replayed: 3 });
    await processed(dead);
    const audited = await env.DB.prepare(
      "SELECT action, affected, outcome FROM operator_actions WHERE target LIKE 'job rj-dry-once:%'",
    ).all();
    expect(audited.results).toEqual([{ action: "bulk-replay", affected: 3, outcome: "allowed" }]);
    // The same job key again is the same job: nothing more is replayed, and the cron's step has nothing to do.
    const again = await adminPost("/admin/api/replays", { filter, jobKey: "rj-dry-once" });
    expect((await again.json<JobAnswer>()).job).toMatchObject({ state: "done", replayed: 3 });
    expect(await advanceJobs(env, Date.now())).toBe(0);
    const view = await adminGet("/admin/api/replays/rj-dry-once");
    expect((await view.json<JobAnswer>()).job).toMatchObject({ state: "done", replayed: 3, scanned: 3, origin: "api" });
    const arrived = keysOf(await lane("rj-main"))
      .map(receiptOf)
      .filter((key) => dead.includes(key));
    // Each dead letter: its first attempt (refused), and its one replay.
    expect(arrived.sort()).toEqual([...dead, ...dead].sort());
    for (const receiptId of dead) expect((await receiptRow(receiptId)).replayCount).toBe(1);
  });

  it("gives a route a delivery of receipts it never had one of (absent when they arrived, or filtered out), once each; its filter still decides", {
    timeout: 120_000,
  }, async () => {
    await setLane("rj-main", 204);
    const since = Date.now();
    // Arrived while the source had only its first route: processed there, and no delivery of "late" exists.
    const beforeLate = await seedReceipt({
      source: SOURCE,
      eventType: "account.debited",
      payload: { type: "account.debited", data: { account: "acct_late", amount: 1 } },
      receivedAt: since,
    });
    const onlyMain = envWithSources({
      [SOURCE]: { ...(env.SOURCES as Record<string, { routes: unknown[] }>)[SOURCE]!, routes: [ROUTES[0]] },
    });
    expect(await processReceipt(onlyMain, beforeLate)).toEqual({ kind: "done", status: "processed" });
    // Arrived with both routes; "late"'s filter turned it away.
    const filteredOut = await sendCredit(SOURCE, { account: "acct_late", amount: 2 });
    await processed([filteredOut]);
    const sent = [beforeLate, filteredOut];
    for (const receiptId of sent) expect(await deliveryRow(receiptId, "late")).toBeNull();
    const filter = { source: SOURCE, route: "late", status: "skipped", since };

    const dry = await adminPost("/admin/api/replays", { filter, dryRun: true });
    expect(await dry.json()).toMatchObject({
      count: 2,
      sample: sent.map((receiptId) => ({ receiptId, route: "late", kind: "new-delivery" })),
    });
    const started = await adminPost("/admin/api/replays", { filter });
    expect((await started.json<JobAnswer>()).job).toMatchObject({ state: "done", replayed: 2 });
    const lateStatus = async (receiptId: string) => (await deliveryRow(receiptId, "late"))?.status;
    await eventually(
      async () =>
        (await lateStatus(beforeLate)) === "processed" && (await lateStatus(filteredOut)) === "skipped"
          ? true
          : undefined,
      30_000,
      "the new deliveries finished",
    );
    expect(keysOf(await lane("rj-late")).filter((key) => sent.includes(receiptOf(key)))).toEqual([
      `${beforeLate}:late`,
    ]);
    // The receipts' own route ran once, before the job, and not again.
    expect(
      keysOf(await lane("rj-main"))
        .map(receiptOf)
        .filter((key) => sent.includes(key)),
    ).toEqual(sent);
  });

  it("resumes from its cursor after its runner stopped: the cron's step replays each once", {
    timeout: 120_000,
  }, async () => {
    const since = Date.now();
    const dead = await deadOnMain(3, "acct_resume");
    // A job whose runner stopped after its creation (a crash, a redeploy): the row alone, at its start.
    await env.DB.prepare(
      "INSERT INTO replay_jobs (job_key, source, filter, origin, created_at, updated_at) VALUES ('rj-resume', ?, ?, 'api', ?, ?)",
    )
      .bind(SOURCE, JSON.stringify({ source: SOURCE, status: "dead", since }), since, since)
      .run();
    expect(await advanceJobs(env, Date.now())).toBe(3);
    await processed(dead);
    expect(await advanceJobs(env, Date.now())).toBe(0);
    const arrived = keysOf(await lane("rj-main"))
      .map(receiptOf)
      .filter((key) => dead.includes(key));
    expect(arrived.sort()).toEqual([...dead, ...dead].sort());
    expect((await adminGet("/admin/api/replays/rj-resume")).status).toBe(200);
  });

  it("a step read before another step moved the job (two runners at once) replays nothing", {
    timeout: 120_000,
  }, async () => {
    await setLane("rj-main", 204);
    const since = Date.now();
    const sent = [await sendCredit(SOURCE, { account: "acct_stale", amount: 1 })];
    sent.push(await sendCredit(SOURCE, { account: "acct_stale", amount: 2 }));
    await processed(sent);
    // Processed receipts match again once their replay is processed: only the job's guard keeps them from a second.
    const filter = { source: SOURCE, status: "processed", since };
    const started = await adminPost("/admin/api/replays", { filter, jobKey: "rj-stale" });
    expect((await started.json<JobAnswer>()).job).toMatchObject({ state: "done", replayed: 2 });
    await processed(sent);
    const row = (await env.DB.prepare(
      "SELECT filter, created_at AS createdAt FROM replay_jobs WHERE job_key = 'rj-stale'",
    ).first<{
      filter: string;
      createdAt: number;
    }>())!;
    const readBeforeTheStep: JobRow = {
      jobKey: "rj-stale",
      source: SOURCE,
      route: null,
      filter: row.filter,
      origin: "api",
      state: "running",
      cursor: null,
      scanned: 0,
      replayed: 0,
      expired: 0,
      createdAt: row.createdAt,
      updatedAt: row.createdAt,
      finishedAt: null,
    };
    expect(await stepJob(env, readBeforeTheStep, Date.now())).toMatchObject({ moved: false, replayed: 0 });
    for (const receiptId of sent)
      expect(await receiptRow(receiptId)).toMatchObject({ status: "processed", replayCount: 1 });
  });

  it("on the dashboard: a plain form under the receipts list, a dry run with its count and sample, then the job's page", {
    timeout: 120_000,
  }, async () => {
    const since = Date.now();
    const dead = await deadOnMain(2, "acct_dashboard");
    const cookie = await dashboardSession();
    const list = await (await dashboardPage("/admin/receipts", { headers: { cookie } })).text();
    expect(list).toContain('<form class="filters" method="post" action="/admin/replays" id="replay-by-filter">');
    const post = (fields: Record<string, string>) =>
      dashboardPage("/admin/replays", {
        method: "POST",
        body: new URLSearchParams({ source: SOURCE, status: "dead", since: String(since), ...fields }),
        headers: { cookie, origin: DASHBOARD_ORIGIN, "content-type": "application/x-www-form-urlencoded" },
      });

    const dry = await post({ intent: "dry-run" });
    expect(dry.status).toBe(200);
    const page = await dry.text();
    expect(page).toContain("Would replay 2 deliveries.");
    for (const receiptId of dead) expect(page).toContain(`<a href="/admin/receipts/${receiptId}">`);
    expect(page).toContain('<button type="submit" name="intent" value="replay">');
    for (const receiptId of dead) expect((await receiptRow(receiptId)).status).toBe("dead");

    const started = await post({ intent: "replay" });
    expect(started.status).toBe(303);
    const jobPage = await (await dashboardPage(started.headers.get("location")!, { headers: { cookie } })).text();
    expect(jobPage).toContain("<dd>done</dd>");
    expect(jobPage).toContain("<dd>dashboard</dd>");
    await processed(dead);

    const typo = await post({ intent: "dry-run", route: "nope" });
    expect(typo.status).toBe(400);
    expect(await typo.text()).toContain("has no route");
  });

  it("refuses a filter with no source, an unknown key, or a route the source does not have", async () => {
    const noSource = await adminPost("/admin/api/replays", { filter: { status: "dead" } });
    expect(noSource.status).toBe(400);
    const typo = await adminPost("/admin/api/replays", { filter: { source: SOURCE, stauts: "dead" } });
    expect(typo.status).toBe(400);
    expect(await typo.text()).toContain("status");
    const route = await adminPost("/admin/api/replays", { filter: { source: SOURCE, route: "nope" }, dryRun: true });
    expect(route.status).toBe(400);
    expect(await route.text()).toContain("no route");
    expect((await adminGet("/admin/api/replays/no-such-job")).status).toBe(404);
  });
});
