import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import {
  ADMIN,
  adminGet,
  DASHBOARD_ORIGIN,
  dashboardPage,
  dashboardSession,
  seedReceipt,
  uniqueSource,
} from "./support";

/**
 * Every method that changes something under /admin (POST, PUT, PATCH, DELETE) is refused 403 with the admin error
 * envelope when a browser says another site asked for it (`Sec-Fetch-Site`, else `Origin`), whatever the body's
 * content type: hono's csrf() on the dashboard looks only at form types, and a cross-origin JSON POST got through.
 * A request with neither header (the CLI, curl with the bearer token) and the dashboard's own forms still work.
 */

const EVIL = "https://evil.example";

async function statusOf(receiptId: string): Promise<string> {
  const row = await env.DB.prepare("SELECT status FROM receipts WHERE id = ?")
    .bind(receiptId)
    .first<{ status: string }>();
  return row!.status;
}

const deadReceipt = () => seedReceipt({ source: uniqueSource("cross-site"), receivedAt: Date.now(), status: "dead" });

function dismiss(receiptId: string, headers: Record<string, string>): Promise<Response> {
  return dashboardPage("/admin/api/dead/dismiss", {
    method: "POST",
    body: JSON.stringify({ receiptIds: [receiptId] }),
    headers: { ...ADMIN, "content-type": "application/json", ...headers },
  });
}

async function expectRefused(response: Response): Promise<void> {
  expect(response.status).toBe(403);
  expect(await response.json()).toEqual({
    error: { code: "cross_site_request", message: expect.stringContaining("own pages") },
  });
}

describe("admin changes asked for by another site", () => {
  it("refuses a cross-origin JSON POST to the dashboard's dead-letter action, session cookie and all", async () => {
    const receiptId = await deadReceipt();
    const cookie = await dashboardSession();
    const crossSite: Record<string, string>[] = [
      { origin: EVIL },
      { "sec-fetch-site": "cross-site" },
      { "sec-fetch-site": "same-site" },
    ];
    for (const headers of crossSite) {
      const response = await dashboardPage("/admin/dead/action", {
        method: "POST",
        body: JSON.stringify({ action: "dismiss", receiptId }),
        headers: { cookie, "content-type": "application/json", ...headers },
      });
      await expectRefused(response);
    }
    expect(await statusOf(receiptId)).toBe("dead");
  });

  it("refuses an API change with a cross-site Origin or Sec-Fetch-Site, bearer token and all; nothing changes", async () => {
    const receiptId = await deadReceipt();
    await expectRefused(await dismiss(receiptId, { origin: EVIL }));
    await expectRefused(await dismiss(receiptId, { origin: "null" }));
    await expectRefused(await dismiss(receiptId, { "sec-fetch-site": "cross-site" }));
    expect(await statusOf(receiptId)).toBe("dead");
  });

  it("lets the CLI and curl in (neither header), and a same-origin page (either header); reads are never refused", async () => {
    const notCrossSite: Record<string, string>[] = [
      {},
      { origin: DASHBOARD_ORIGIN },
      { "sec-fetch-site": "same-origin" },
    ];
    for (const headers of notCrossSite) {
      const receiptId = await deadReceipt();
      const response = await dismiss(receiptId, headers);
      expect(response.status, JSON.stringify(headers)).toBe(200);
      expect(await statusOf(receiptId)).toBe("dismissed");
    }
    const read = await adminGet("/admin/api/dead", { ...ADMIN, origin: EVIL, "sec-fetch-site": "cross-site" });
    expect(read.status).toBe(200);
  });

  it("lets the dashboard's own form posts through, as a browser sends them", async () => {
    const signIn = await dashboardPage("/admin/login", {
      method: "POST",
      body: new URLSearchParams({ token: env.ADMIN_TOKEN }),
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        origin: DASHBOARD_ORIGIN,
        "sec-fetch-site": "same-origin",
      },
    });
    expect(signIn.status).toBe(303);
    const cookie = signIn.headers.get("set-cookie")!.split(";")[0]!;
    const receiptId = await deadReceipt();
    const action = await dashboardPage("/admin/dead/action", {
      method: "POST",
      body: new URLSearchParams({ action: "dismiss", receiptId }),
      headers: {
        cookie,
        "content-type": "application/x-www-form-urlencoded",
        origin: DASHBOARD_ORIGIN,
        "sec-fetch-site": "same-origin",
      },
    });
    expect(action.status).toBe(303);
    expect(await statusOf(receiptId)).toBe("dismissed");
  });
});
