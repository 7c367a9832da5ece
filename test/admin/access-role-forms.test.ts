import { env } from "cloudflare:workers";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { app } from "../../src/app";
import { redirectKeyFetchesForTests } from "../../src/providers/key-fetch";
import { seedReceipt as seedWithBody } from "../consumers/support/processing";
import { CRON_TEST_TIMEOUT_MS, runCron } from "../reconcile/support";
import { accessEnv, actionsBy, publishTeamKeys } from "./access-support";
import { DASHBOARD_ORIGIN, seedReceipt, uniqueSource } from "./support";

/**
 * What each role is offered (docs/operating.md, "Access, roles and the audit log"): the dashboard renders an
 * action's form only to a role that may use it, a short note in its place to one that may not; and a bulk replay's
 * dry run, which writes nothing, is any role's, while starting the job stays an operator's. Through the real routes,
 * signed in through Access as a viewer and as an operator.
 */

const run = crypto.randomUUID().slice(0, 8);
const VIEWER = `forms-viewer-${run}@example.com`;
const OPERATOR = `forms-operator-${run}@example.com`;
const accessOn = accessEnv({ admin: [], operator: [OPERATOR], viewer: [VIEWER] });
const HOUR = 3_600_000;

let team: Awaited<ReturnType<typeof publishTeamKeys>>;
const tokens: Record<"viewer" | "operator", string> = { viewer: "", operator: "" };

beforeAll(async () => {
  redirectKeyFetchesForTests(env, inject("keyStandinOrigin"));
  team = await publishTeamKeys();
  tokens.viewer = await team.sign({ email: VIEWER });
  tokens.operator = await team.sign({ email: OPERATOR });
});
afterAll(() => redirectKeyFetchesForTests(env, null));

async function request(path: string, role: keyof typeof tokens, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  headers.set("cf-access-jwt-assertion", tokens[role]);
  return await app.fetch(new Request(`${DASHBOARD_ORIGIN}${path}`, { ...init, headers, redirect: "manual" }), accessOn);
}

async function page(path: string, role: keyof typeof tokens): Promise<string> {
  const response = await request(path, role);
  expect(response.status, `${role} GET ${path}`).toBe(200);
  return response.text();
}

describe("the dashboard offers each role only the forms it may use", () => {
  it("shows a viewer notes instead of replay, dismiss and pause forms, and an operator the forms", async () => {
    const source = uniqueSource("forms");
    const receiptId = await seedReceipt({ source, receivedAt: Date.now(), status: "dead" });
    const dead = `/admin/dead?source=${source}`;
    const receipt = `/admin/receipts/${receiptId}`;
    // A source whose route has delivery control (test/wrangler config): its page carries Pause.
    const gated = "/admin/sources/audit-log-gated";

    const viewerDead = await page(dead, "viewer");
    expect(viewerDead).toContain(receiptId);
    expect(viewerDead).not.toContain('id="replay-selected"');
    expect(viewerDead).not.toContain('id="dismiss-selected"');
    expect(viewerDead).toContain("Your role (viewer) can&#39;t replay or dismiss dead letters.");
    const viewerReceipt = await page(receipt, "viewer");
    expect(viewerReceipt).not.toContain('id="dismiss"');
    expect(viewerReceipt).toContain("Your role (viewer) can&#39;t dismiss it.");
    const viewerGated = await page(gated, "viewer");
    expect(viewerGated).not.toContain('id="route-ledger-pause"');
    expect(viewerGated).toContain("Your role (viewer) can&#39;t pause this route.");

    const operatorDead = await page(dead, "operator");
    expect(operatorDead).toContain('id="replay-selected"');
    expect(operatorDead).toContain('id="dismiss-selected"');
    expect(operatorDead).not.toContain("Your role");
    expect(await page(receipt, "operator")).toContain('id="dismiss"');
    expect(await page(gated, "operator")).toContain('id="route-ledger-pause"');
  });

  it(
    "shows a viewer no acknowledge or resolve form on an open issue, and an operator both",
    async () => {
      // A configured source (test/fixtures/sources/access-role-forms.json): the monitor opens issues for those.
      const source = "access-role-forms";
      const now = Date.now();
      await seedReceipt({ source, receivedAt: now - HOUR, status: "dead", attempts: 5 });
      await runCron(now);
      const row = (html: string) =>
        new RegExp(`<tr data-issue="dead-letters:${source}:default">(.*?)</tr>`, "s").exec(html)?.[1];

      const viewerRow = row(await page("/admin/issues", "viewer"));
      expect(viewerRow, "the issue's row").toBeDefined();
      expect(viewerRow).not.toContain("/acknowledge");
      expect(viewerRow).not.toContain("/resolve");
      expect(viewerRow).toContain("Your role (viewer) can&#39;t acknowledge or resolve.");
      const operatorRow = row(await page("/admin/issues", "operator"));
      expect(operatorRow).toContain("/acknowledge");
      expect(operatorRow).toContain("/resolve");
      expect(operatorRow).not.toContain("Your role");
    },
    CRON_TEST_TIMEOUT_MS,
  );
});

describe("a bulk replay's dry run is any role's; the replay stays an operator's", () => {
  /** A configured source (test/fixtures/sources/replay-jobs.json); the event type is this run's alone. */
  const SOURCE = "replay-jobs";
  const TYPE = `forms.${run}`;
  const filter = () => ({ source: SOURCE, status: "dead", type: TYPE });

  function replays(role: keyof typeof tokens, body: unknown): Promise<Response> {
    return request("/admin/api/replays", role, {
      method: "POST",
      body: JSON.stringify(body),
      headers: { "content-type": "application/json" },
    });
  }

  it("answers a viewer's dry run through the API, refuses its replay 403 (logged), and runs an operator's", async () => {
    const dryRun = await replays("viewer", { filter: filter(), dryRun: true });
    expect(dryRun.status).toBe(200);
    expect(await dryRun.json()).toMatchObject({ dryRun: true, complete: true });
    const refused = await replays("viewer", { filter: filter(), dryRun: false });
    expect(refused.status).toBe(403);
    expect((await replays("viewer", { filter: filter() })).status).toBe(403);
    expect((await replays("operator", { filter: filter(), dryRun: true })).status).toBe(200);
    expect((await replays("operator", { filter: filter() })).status).toBe(202);
    // The dry run is no action: only the two refusals are in the viewer's log.
    expect((await actionsBy(VIEWER)).filter(({ target }) => target === "/admin/api/replays")).toEqual([
      expect.objectContaining({ action: "bulk-replay", outcome: "refused" }),
      expect.objectContaining({ action: "bulk-replay", outcome: "refused" }),
    ]);
  });

  it("answers a viewer's dashboard dry run with a note where the Replay button would be", async () => {
    await seedWithBody({ source: SOURCE, payload: { forms: run }, eventType: TYPE, status: "dead" });
    const form = (intent: string) => new URLSearchParams({ source: SOURCE, status: "dead", type: TYPE, intent });
    const post = (role: keyof typeof tokens, intent: string) =>
      request("/admin/replays", role, {
        method: "POST",
        body: form(intent),
        headers: { "content-type": "application/x-www-form-urlencoded", origin: DASHBOARD_ORIGIN },
      });
    const viewerDryRun = await post("viewer", "dry-run");
    expect(viewerDryRun.status).toBe(200);
    const html = await viewerDryRun.text();
    expect(html).toContain("Would replay 1 delivery.");
    expect(html).not.toContain('value="replay"');
    expect(html).toContain("Your role (viewer) can&#39;t replay.");
    await expect((await post("operator", "dry-run")).text()).resolves.toContain(
      '<button type="submit" name="intent" value="replay">',
    );
    expect((await post("viewer", "replay")).status).toBe(403);
  });
});
