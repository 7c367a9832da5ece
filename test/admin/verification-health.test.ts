import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { VerificationReport } from "../../src/admin/health/verification-report";
import { app } from "../../src/app";
import { difference } from "../../src/lib/meter";
import { secretValue } from "../../src/lib/secrets";
import { credit, signDemo } from "../support/deliveries";
import { meterTotals } from "../support/meters";
import { keysInOneShard, settle, settleEachTest } from "../support/storage";

/**
 * The verification health (docs/operating.md, "Verification health") through the real route and the real admin
 * API: a source rotating from VH_OLD_SECRET to VH_CURRENT_SECRET (listed first) gets deliveries signed with each,
 * and GET /admin/api/sources/:source says which secret verified how many, when each last did, and why the refused
 * ones were refused. Counts come from the dev server's memory (LOCAL_DEVELOPMENT) or Analytics Engine; last uses
 * from the claim shards, stamped at most once per secret and hour.
 */

settleEachTest();

const CURRENT = secretValue(env, "VH_CURRENT_SECRET")!;
const OLD = secretValue(env, "VH_OLD_SECRET")!;
const local = { ...env, LOCAL_DEVELOPMENT: "true" } as unknown as Env;

function deliver(source: string, eventKey: string, secret: string, target: Env = env) {
  const body = JSON.stringify(credit(`acct_${eventKey}`, 1));
  return app.fetch(
    new Request(`https://receiver.test/webhooks/${source}`, {
      method: "POST",
      body,
      headers: signDemo(eventKey, body, undefined, secret),
    }),
    target,
  );
}

async function sourceDetail(source: string, target: Env = env) {
  const answer = await app.fetch(
    new Request(`https://receiver.test/admin/api/sources/${source}`, {
      headers: { authorization: `Bearer ${env.ADMIN_TOKEN}` },
    }),
    target,
  );
  const text = await answer.text();
  return {
    status: answer.status,
    text,
    verification: (JSON.parse(text) as { verification: VerificationReport }).verification,
  };
}

const runId = crypto.randomUUID().slice(0, 8);

/** Generous on purpose, as in test/pipeline/budget.test.ts: a loaded machine is slow to settle; rows are what is held. */
const SETTLE_DEADLINE_MS = 180_000;

describe("verification health, through the real route", { timeout: SETTLE_DEADLINE_MS + 60_000 }, () => {
  it("says which secret verified each delivery, its share, its last use, and the rejections by reason", async () => {
    const started = Date.now();
    for (let index = 0; index < 3; index++)
      expect((await deliver("vh-rotation", `vh_cur_${runId}_${index}`, CURRENT, local)).status).toBe(200);
    expect((await deliver("vh-rotation", `vh_old_${runId}`, OLD, local)).status).toBe(200);
    // A duplicate is a verified delivery too; a forgery is refused and counted by its reason.
    expect((await deliver("vh-rotation", `vh_old_${runId}`, OLD, local)).status).toBe(200);
    expect(
      (await deliver("vh-rotation", `vh_forged_${runId}`, "whsec_Zm9yZ2VkLXNlY3JldC1mb3ItdGhlLXRlc3Q=", local)).status,
    ).toBe(401);

    const { status, text, verification } = await sourceDetail("vh-rotation", local);
    expect(status).toBe(200);
    expect(verification.counts).toBe("dev-server-memory");
    const [current, old] = verification.secrets;
    expect(current).toMatchObject({ name: "VH_CURRENT_SECRET", kind: "listed", deliveries: 3, advice: "current" });
    expect(old).toMatchObject({ name: "VH_OLD_SECRET", kind: "listed", deliveries: 2, advice: "still-verifying" });
    expect(current!.share).toBeCloseTo(3 / 5);
    expect(old!.lastVerifiedAt).toBeGreaterThanOrEqual(started);
    expect(current!.lastVerifiedAt).toBeGreaterThanOrEqual(started);
    expect(verification.warnings).toEqual([
      "`VH_OLD_SECRET` still verifies 40 % of deliveries; last used within the last hour",
    ]);
    expect(verification.rejectionsByReason).toEqual({ "signature-mismatch": 1 });
    expect(verification.rejectionRate).toBeCloseTo(1 / 6);
    expect(verification.hourly.reduce((sum, hour) => sum + hour.verified, 0)).toBe(5);
    // Names, never values.
    expect(text).not.toContain(CURRENT);
    expect(text).not.toContain(OLD);
    expect(text).not.toContain(CURRENT.slice("whsec_".length));
  });

  it("shows the same on the dashboard's source page: the warning, each secret's share and advice, the refusals", async () => {
    expect((await deliver("vh-rotation", `vh_page_${runId}`, OLD, local)).status).toBe(200);
    const login = await app.fetch(
      new Request("https://receiver.test/admin/login", {
        method: "POST",
        body: new URLSearchParams({ token: env.ADMIN_TOKEN }),
        headers: { "content-type": "application/x-www-form-urlencoded", origin: "https://receiver.test" },
      }),
      local,
    );
    const session = login.headers.get("set-cookie")!.split(";")[0]!;
    const html = await (
      await app.fetch(
        new Request("https://receiver.test/admin/sources/vh-rotation", { headers: { cookie: session } }),
        local,
      )
    ).text();
    const section = /<section id="verification">[\s\S]*?<\/section>/.exec(html)?.[0] ?? "";
    expect(section).toContain(
      '<li class="still-verifying">`VH_OLD_SECRET` still verifies 50 % of deliveries; last used within the last hour</li>',
    );
    expect(section).toMatch(/VH_CURRENT_SECRET<\/td>[\s\S]*?>3<\/td>[\s\S]*?50 %[\s\S]*?badge current/);
    expect(section).toMatch(/VH_OLD_SECRET<\/td>[\s\S]*?>3<\/td>[\s\S]*?50 %[\s\S]*?badge still-verifying/);
    expect(section).toContain("signature-mismatch 1");
    expect(section).toContain("Counts by this dev server");
    expect(section).not.toContain(OLD);
  });

  it("keeps each secret's last use in the shards: a deployed Worker without counts still knows it", async () => {
    const started = Date.now();
    expect((await deliver("vh-durable", `vh_durable_${runId}`, OLD)).status).toBe(200);
    const { verification } = await sourceDetail("vh-durable");
    expect(verification.counts).toBe("not-stored");
    expect(
      verification.secrets.map((secret) => [secret.name, secret.deliveries, secret.lastVerifiedAt !== null]),
    ).toEqual([
      ["VH_CURRENT_SECRET", null, false],
      ["VH_OLD_SECRET", null, true],
    ]);
    expect(verification.secrets[1]!.lastVerifiedAt).toBeGreaterThanOrEqual(started);
    // The current secret has verified nothing while the old one has: the sender has not switched yet.
    expect(verification.warnings).toEqual([
      "`VH_CURRENT_SECRET` (the current secret) has verified nothing yet: the sender still signs with an older one",
      "`VH_OLD_SECRET` last used within the last hour",
    ]);
  });

  it("stamps a secret's use at most once per hour per shard, not once per delivery", async () => {
    const perSecret = 10;
    const keys = keysInOneShard(`vh_rows_${runId}`, 2 * perSecret);
    await settle(SETTLE_DEADLINE_MS);
    const before = await meterTotals("vh-rows");
    const answers = await Promise.all(
      keys.map((eventKey, index) => deliver("vh-rows", eventKey, index < perSecret ? OLD : CURRENT)),
    );
    expect(answers.map((answer) => answer.status)).toEqual(Array(keys.length).fill(200));
    await settle(SETTLE_DEADLINE_MS);
    const spent = difference(await meterTotals("vh-rows"), before);
    const stampRows = spent.doRowsWritten - spent.doAlarmWrites - 2 * keys.length;
    // One row per secret in the one shard; one more each if an hour turned during the test. Never one per delivery.
    expect(stampRows).toBeGreaterThanOrEqual(2);
    expect(stampRows).toBeLessThanOrEqual(4);
  });

  it("stamps nothing for a source with a single secret: the happy path's rows are unchanged", async () => {
    const keys = keysInOneShard(`vh_single_${runId}`, 10);
    await settle(SETTLE_DEADLINE_MS);
    const before = await meterTotals("vh-single");
    const answers = await Promise.all(keys.map((eventKey) => deliver("vh-single", eventKey, CURRENT)));
    expect(answers.map((answer) => answer.status)).toEqual(Array(keys.length).fill(200));
    await settle(SETTLE_DEADLINE_MS);
    const spent = difference(await meterTotals("vh-single"), before);
    expect(spent.doRowsWritten - spent.doAlarmWrites).toBe(2 * keys.length);
    const { verification } = await sourceDetail("vh-single");
    expect(verification.secrets).toMatchObject([{ name: "VH_CURRENT_SECRET", advice: "only-secret", message: null }]);
  });

  it("answers 404 for a source that is not configured", async () => {
    const answer = await app.fetch(
      new Request("https://receiver.test/admin/api/sources/vh-nowhere", {
        headers: { authorization: `Bearer ${env.ADMIN_TOKEN}` },
      }),
      env,
    );
    expect(answer.status).toBe(404);
  });
});
