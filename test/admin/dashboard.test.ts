import { env, exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { issueSession } from "../../src/admin/auth";
import { account, credit, waitForStatus } from "../support/deliveries";
import { seedReceipt, uniqueSource } from "./support";

const ORIGIN = "https://receiver.test";

function page(path: string, init: RequestInit = {}): Promise<Response> {
  return exports.default.fetch(new Request(`${ORIGIN}${path}`, { redirect: "manual", ...init }));
}

function login(token: string, origin = ORIGIN): Promise<Response> {
  return page("/admin/login", {
    method: "POST",
    body: new URLSearchParams({ token }),
    headers: { "content-type": "application/x-www-form-urlencoded", origin },
  });
}

async function sessionCookie(): Promise<string> {
  const response = await login(env.ADMIN_TOKEN);
  return response.headers.get("set-cookie")!.split(";")[0]!;
}

describe("dashboard sign-in", () => {
  it("sends every page to the sign-in form without a session, and shows no data", async () => {
    const receiptId = await seedReceipt({ source: uniqueSource("dash-anon"), receivedAt: Date.now(), status: "dead" });
    for (const path of ["/admin", "/admin/receipts", `/admin/receipts/${receiptId}`, "/admin/dead", "/admin/quarantine", "/admin/alerts"]) {
      const response = await page(path);
      expect(response.status, path).toBe(303);
      expect(response.headers.get("location")).toBe("/admin/login");
      expect(await response.text()).not.toContain(receiptId);
    }
    const replay = await page(`/admin/receipts/${receiptId}/replay`, { method: "POST", headers: { origin: ORIGIN } });
    expect(replay.status).toBe(401);
  });

  it("trades the right token for an HttpOnly, SameSite=Strict, Secure cookie that does not contain the token", async () => {
    const refused = await login("not-the-token");
    expect(refused.status).toBe(401);
    expect(refused.headers.get("set-cookie")).toBeNull();

    const accepted = await login(env.ADMIN_TOKEN);
    expect(accepted.status).toBe(303);
    expect(accepted.headers.get("location")).toBe("/admin");
    const cookie = accepted.headers.get("set-cookie")!;
    expect(cookie).toMatch(/^admin_session=\d{13}\.[0-9a-f]{64};/);
    expect(cookie).toContain("HttpOnly");
    expect(cookie).toContain("Secure");
    expect(cookie).toContain("SameSite=Strict");
    expect(cookie).toContain("Path=/admin");
    expect(cookie).not.toContain(env.ADMIN_TOKEN);

    const overview = await page("/admin", { headers: { cookie: cookie.split(";")[0]! } });
    expect(overview.status).toBe(200);
    expect(overview.headers.get("content-security-policy")).toContain("default-src 'none'");
    const html = await overview.text();
    expect(html).toContain('id="sources"');
    expect(html).not.toContain(env.ADMIN_TOKEN);
  });

  it("refuses a cross-site form post, a forged session and an expired one", async () => {
    expect((await login(env.ADMIN_TOKEN, "https://evil.example")).status).toBe(403);
    const forged = `admin_session=${Date.now() + 60_000}.${"0".repeat(64)}`;
    expect((await page("/admin", { headers: { cookie: forged } })).status).toBe(303);
    const expired = (await issueSession(env.ADMIN_TOKEN, Date.now() - 13 * 3_600_000)).toString();
    expect((await page("/admin", { headers: { cookie: `admin_session=${expired}` } })).status).toBe(303);
    const otherToken = await issueSession("some-other-token-of-enough-length");
    expect((await page("/admin", { headers: { cookie: `admin_session=${otherToken}` } })).status).toBe(303);
  });
});

describe("dashboard pages", () => {
  it("renders a filtered receipts table and a receipt with its timeline", async () => {
    const cookie = await sessionCookie();
    const source = uniqueSource("dash");
    const receivedAt = Date.now() - 5000;
    const receiptId = await seedReceipt({
      source,
      receivedAt,
      status: "dead",
      eventType: "account.credited",
      lastError: "data.amount must be an integer",
      body: Buffer.from('{"type":"account.credited","data":{"amount":"<script>alert(1)</script>"}}'),
    });
    const list = await (await page(`/admin/receipts?source=${source}&status=dead`, { headers: { cookie } })).text();
    expect(list).toContain(`/admin/receipts/${receiptId}`);
    const empty = await (await page(`/admin/receipts?source=${source}&status=processed`, { headers: { cookie } })).text();
    expect(empty).toContain("No receipts match.");
    const invalid = await page(`/admin/receipts?status=bogus`, { headers: { cookie } });
    expect(invalid.status).toBe(400);
    expect(await invalid.text()).toContain("must be a comma-separated list");

    const detail = await (await page(`/admin/receipts/${receiptId}`, { headers: { cookie } })).text();
    expect(detail).toContain('id="timeline"');
    expect(detail).toContain("data.amount must be an integer");
    expect(detail).toContain('id="replay"');
    // The stored body is shown escaped, never as markup.
    expect(detail).not.toContain("<script>alert(1)</script>");
    expect(detail).toContain("&lt;script&gt;");
  });

  it("replays from the receipt page and from the dead-letter list", async () => {
    const cookie = await sessionCookie();
    const form = (fields: [string, string][]) => ({
      method: "POST",
      body: new URLSearchParams(fields),
      headers: { cookie, origin: ORIGIN, "content-type": "application/x-www-form-urlencoded" },
    });
    const seedDead = async () => {
      const eventKey = `msg_dash_${crypto.randomUUID()}`;
      const accountId = `acct_${eventKey}`;
      const receiptId = await seedReceipt({
        source: "admin-audit",
        eventKey,
        eventType: "account.credited",
        receivedAt: Date.now(),
        status: "dead",
        lastError: "destination answered 503",
        body: Buffer.from(JSON.stringify(credit(accountId, 3))),
      });
      return { receiptId, eventKey, accountId };
    };

    const single = await seedDead();
    const replayed = await page(`/admin/receipts/${single.receiptId}/replay`, form([]));
    expect(replayed.status).toBe(303);
    expect(replayed.headers.get("location")).toBe(`/admin/receipts/${single.receiptId}?replay=replayed`);

    const [a, b] = [await seedDead(), await seedDead()];
    const bulk = await page("/admin/dead/replay", form([["scope", "selected"], ["receiptId", a.receiptId], ["receiptId", b.receiptId]]));
    expect(bulk.headers.get("location")).toBe("/admin/dead?replayed=2");

    for (const dead of [single, a, b]) {
      await waitForStatus("admin-audit", dead.eventKey);
      expect((await account(dead.accountId))?.credits).toBe(3);
    }
    const crossSite = await page(`/admin/receipts/${single.receiptId}/replay`, { ...form([]), headers: { cookie, origin: "https://evil.example", "content-type": "application/x-www-form-urlencoded" } });
    expect(crossSite.status).toBe(403);
  });
});
