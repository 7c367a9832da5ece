import { env } from "cloudflare:workers";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { app } from "../../src/app";
import { redirectKeyFetchesForTests } from "../../src/providers/key-fetch";
import { AUDIENCE, accessEnv, actionsBy, publishTeamKeys, receiptState, type TeamKeys } from "./access-support";
import { ADMIN, DASHBOARD_ORIGIN, seedReceipt, uniqueSource } from "./support";

/**
 * Sign-in through Cloudflare Access, through the real route (`app.fetch` with Access configured): the
 * Cf-Access-Jwt-Assertion is verified against the team's published keys (served by the key stand-in, fetched by the
 * Worker from the URL it derives from ACCESS_TEAM_DOMAIN), its audience and issuer checked, and the identity mapped
 * to a role by ACCESS_ROLES. Each role is tried on an action of each level; refusals are 403 and in the audit log.
 */

const run = crypto.randomUUID().slice(0, 8);
const VIEWER = `viewer-${run}@example.com`;
const OPERATOR = `Operator-${run}@Example.com`;
const ADMIN_USER = `admin-${run}@example.com`;
const STRANGER = `stranger-${run}@example.com`;
const SERVICE = `automation-${run}.access`;
const ROLES = {
  admin: [`group:ops-admins-${run}`],
  operator: [OPERATOR.toLowerCase(), `service:${SERVICE}`],
  viewer: [VIEWER, `group:readers-${run}`],
};
const accessOn = accessEnv(ROLES);

let team: Awaited<ReturnType<typeof publishTeamKeys>>;

beforeAll(async () => {
  redirectKeyFetchesForTests(env, inject("keyStandinOrigin"));
  team = await publishTeamKeys();
});
afterAll(() => redirectKeyFetchesForTests(env, null));

function asUser(sign: TeamKeys["sign"], claims: Record<string, unknown>) {
  return sign(claims);
}

function apiCall(path: string, assertion: string | null, init: RequestInit = {}, testEnv = accessOn) {
  const headers = new Headers(init.headers);
  if (assertion !== null) headers.set("cf-access-jwt-assertion", assertion);
  return app.fetch(new Request(`${DASHBOARD_ORIGIN}${path}`, { ...init, headers, redirect: "manual" }), testEnv);
}

function post(path: string, assertion: string | null, body: unknown, testEnv = accessOn) {
  return apiCall(
    path,
    assertion,
    { method: "POST", body: JSON.stringify(body), headers: { "content-type": "application/json" } },
    testEnv,
  );
}

async function deadReceipt(): Promise<string> {
  return seedReceipt({ source: uniqueSource("access"), receivedAt: Date.now(), status: "dead" });
}

describe("Access roles on the admin API", () => {
  it("lets a viewer read, and refuses its replay 403, logged as refused, with nothing replayed", async () => {
    const token = await asUser(team.sign, { email: VIEWER });
    expect((await apiCall("/admin/api/receipts?limit=1", token)).status).toBe(200);
    const receiptId = await deadReceipt();

    const replay = await post(`/admin/api/receipts/${receiptId}/replay`, token, {});
    expect(replay.status).toBe(403);
    expect(await replay.json()).toEqual({
      error: { code: "forbidden_for_role", message: expect.stringContaining("operator") },
    });
    const bulk = await post("/admin/api/dead/replay", token, { source: "anything" });
    expect(bulk.status).toBe(403);
    expect((await post("/admin/api/issues/dead-letters:demo/acknowledge", token, { note: "mine" })).status).toBe(403);
    // Every role reads the audit log.
    expect((await apiCall("/admin/api/audit-log?limit=1", token)).status).toBe(200);

    expect(await receiptState(receiptId)).toEqual({ status: "dead", replayCount: 0 });
    expect(
      (await actionsBy(VIEWER)).map(({ role, via, action, target, affected, outcome }) => ({
        role,
        via,
        action,
        target,
        affected,
        outcome,
      })),
    ).toEqual([
      {
        role: "viewer",
        via: "api",
        action: "replay",
        target: `/admin/api/receipts/${receiptId}/replay`,
        affected: 0,
        outcome: "refused",
      },
      {
        role: "viewer",
        via: "api",
        action: "bulk-replay",
        target: "/admin/api/dead/replay",
        affected: 0,
        outcome: "refused",
      },
      {
        role: "viewer",
        via: "api",
        action: "acknowledge",
        target: "/admin/api/issues/dead-letters:demo/acknowledge",
        affected: 0,
        outcome: "refused",
      },
    ]);
  });

  it("refuses a viewer's listener 403 (its answers would mark deliveries processed) and lets an operator describe it", async () => {
    const viewer = await asUser(team.sign, { email: VIEWER });
    const refused = await apiCall("/admin/api/listen/listen-laptop", viewer);
    expect(refused.status).toBe(403);
    const operator = await asUser(team.sign, { email: OPERATOR });
    const described = await apiCall("/admin/api/listen/listen-laptop", operator);
    expect(described.status).toBe(200);
    expect(await described.json()).toEqual({
      source: "listen-laptop",
      route: expect.any(String),
      listen: "laptop-test",
    });
    expect(
      (await actionsBy(VIEWER))
        .filter(({ action }) => action === "listen")
        .map(({ action, target, outcome }) => ({ action, target, outcome })),
    ).toEqual([{ action: "listen", target: "/admin/api/listen/listen-laptop", outcome: "refused" }]);
  });

  it("lets an operator dismiss (logged with what it affected) and refuses it a kept secret's approval", async () => {
    // The email matches whatever its case: ACCESS_ROLES lists it lowercased.
    const token = await asUser(team.sign, { email: OPERATOR });
    const receiptId = await deadReceipt();
    const dismissed = await post("/admin/api/dead/dismiss", token, { receiptIds: [receiptId] });
    expect(dismissed.status).toBe(200);
    expect(await dismissed.json()).toEqual({ changed: [receiptId], unchanged: [] });
    const approve = await post(`/admin/api/sources/demo/kept-secrets/${"0".repeat(16)}/approve`, token, {});
    expect(approve.status).toBe(403);
    // Past the role check: no such issue is open, which the route itself answers.
    expect((await post(`/admin/api/issues/none-${run}/acknowledge`, token, { note: "looking" })).status).toBe(404);
    expect(
      (await actionsBy(OPERATOR)).map(({ action, target, affected, outcome, role }) => ({
        action,
        target,
        affected,
        outcome,
        role,
      })),
    ).toEqual([
      { action: "dismiss", target: `receipt ${receiptId}`, affected: 1, outcome: "allowed", role: "operator" },
      {
        action: "approve",
        target: `/admin/api/sources/demo/kept-secrets/${"0".repeat(16)}/approve`,
        affected: 0,
        outcome: "refused",
        role: "operator",
      },
    ]);
  });

  it("gives an admin by group the admin actions, and a reader's group only reads", async () => {
    const admin = await asUser(team.sign, { email: ADMIN_USER, groups: [`ops-admins-${run}`] });
    // Past the role check: the demo source hands over no secret to keep, which the route itself answers.
    const approve = await post(`/admin/api/sources/demo/kept-secrets/${"0".repeat(16)}/approve`, admin, {});
    expect(approve.status).toBe(400);
    expect(((await approve.json()) as { error: { code: string } }).error.code).toBe("no_kept_secrets");

    const reader = await asUser(team.sign, {
      email: `reader-${run}@example.com`,
      custom: { groups: [`readers-${run}`] },
    });
    expect((await apiCall("/admin/api/dead", reader)).status).toBe(200);
    expect((await post("/admin/api/dead/dismiss", reader, { receiptIds: [await deadReceipt()] })).status).toBe(403);
  });

  it("maps an Access service token by its client id (common_name, no email)", async () => {
    const service = await asUser(team.sign, { common_name: SERVICE, sub: "" });
    const receiptId = await deadReceipt();
    expect((await post("/admin/api/dead/dismiss", service, { receiptIds: [receiptId] })).status).toBe(200);
    expect((await actionsBy(`service:${SERVICE}`)).map(({ role, action }) => ({ role, action }))).toEqual([
      { role: "operator", action: "dismiss" },
    ]);
  });

  it("refuses an identity listed nowhere: default deny", async () => {
    const response = await apiCall("/admin/api/receipts?limit=1", await asUser(team.sign, { email: STRANGER }));
    expect(response.status).toBe(403);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe("no_role");
  });

  it("refuses a token not signed by the team, for another audience, from another issuer, or expired: 401", async () => {
    const tokens = [
      await team.signWithOtherKey({ email: ADMIN_USER, groups: [`ops-admins-${run}`] }),
      await team.sign({ email: VIEWER }, { audience: `${AUDIENCE}0` }),
      await team.sign({ email: VIEWER }, { issuer: "https://another-team.cloudflareaccess.com" }),
      await team.sign({ email: VIEWER }, { expiresIn: "-1m" }),
      "not-a-jwt",
    ];
    for (const token of tokens) {
      const response = await apiCall("/admin/api/receipts?limit=1", token);
      expect(response.status).toBe(401);
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe("access_token_invalid");
    }
  });

  it("keeps ADMIN_TOKEN as an admin for the CLI, logged as admin-token; ignores the assertion with Access off", async () => {
    const receiptId = await deadReceipt();
    const dismissed = await post("/admin/api/dead/dismiss", null, { receiptIds: [receiptId] });
    expect(dismissed.status).toBe(401);
    const withToken = await apiCall("/admin/api/dead/dismiss", null, {
      method: "POST",
      body: JSON.stringify({ receiptIds: [receiptId] }),
      headers: { ...ADMIN, "content-type": "application/json" },
    });
    expect(withToken.status).toBe(200);
    const rows = await actionsBy("admin-token");
    expect(rows.find((row) => row.target === `receipt ${receiptId}`)).toMatchObject({
      role: "admin",
      via: "api",
      action: "dismiss",
      affected: 1,
    });

    // Access off (the shipped config): a valid assertion signs nobody in.
    const token = await asUser(team.sign, { email: VIEWER });
    expect((await apiCall("/admin/api/receipts?limit=1", token, {}, env)).status).toBe(401);
  });

  it("answers 503 naming the problem when Access is half configured or ACCESS_ROLES is malformed", async () => {
    const token = await asUser(team.sign, { email: VIEWER });
    for (const broken of [
      accessEnv(ROLES, { ACCESS_AUD: undefined }),
      accessEnv({ superuser: [VIEWER] }),
      accessEnv(ROLES, { ACCESS_TEAM_DOMAIN: "evil.example.com" }),
    ]) {
      const response = await apiCall("/admin/api/receipts?limit=1", token, {}, broken);
      expect(response.status).toBe(503);
      expect(((await response.json()) as { error: { code: string } }).error.code).toBe("access_config_invalid");
    }
  });
});

describe("Access roles on the dashboard", () => {
  it("shows a viewer the pages and refuses its replay form 403, logged as refused through the dashboard", async () => {
    const viewer = `dash-${VIEWER}`;
    const roles = accessEnv({ ...ROLES, viewer: [viewer] });
    const token = await asUser(team.sign, { email: viewer });
    expect((await apiCall("/admin/dead", token, {}, roles)).status).toBe(200);
    const receiptId = await deadReceipt();
    const replay = await apiCall(
      "/admin/dead/action",
      token,
      {
        method: "POST",
        body: new URLSearchParams({ action: "replay", receiptId }),
        headers: { "content-type": "application/x-www-form-urlencoded", origin: DASHBOARD_ORIGIN },
      },
      roles,
    );
    expect(replay.status).toBe(403);
    expect(await receiptState(receiptId)).toEqual({ status: "dead", replayCount: 0 });
    expect((await actionsBy(viewer)).map(({ via, action, outcome }) => ({ via, action, outcome }))).toEqual([
      { via: "dashboard", action: "replay", outcome: "refused" },
    ]);
  });

  it("sends a request with neither a session nor an assertion to the sign-in form", async () => {
    const response = await apiCall("/admin/dead", null);
    expect(response.status).toBe(303);
    expect(response.headers.get("location")).toBe("/admin/login");
  });
});
