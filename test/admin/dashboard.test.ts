import { env, exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { STYLE } from "../../src/admin/dashboard/styles";
import { issueSession } from "../../src/admin/guards/auth";
import { account, credit, waitForStatus } from "../support/deliveries";
import { adminGet, seedAlert, seedReceipt, uniqueSource } from "./support";

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

/** The one-time message a form post leaves for the next page, as a request cookie. */
function flashCookie(response: Response): string {
  const cookie = response.headers.getSetCookie().find((value) => value.startsWith("admin_flash="));
  expect(cookie, "the post leaves a flash message").toBeDefined();
  return cookie!.split(";")[0]!;
}

async function sessionCookie(): Promise<string> {
  const response = await login(env.ADMIN_TOKEN);
  return response.headers.get("set-cookie")!.split(";")[0]!;
}

describe("dashboard sign-in", () => {
  it("sends every page to the sign-in form without a session, and shows no data", async () => {
    const receiptId = await seedReceipt({ source: uniqueSource("dash-anon"), receivedAt: Date.now(), status: "dead" });
    for (const path of [
      "/admin",
      "/admin/receipts",
      `/admin/receipts/${receiptId}`,
      "/admin/dead",
      "/admin/quarantine",
      "/admin/alerts",
    ]) {
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

describe("dashboard stylesheet", () => {
  it("names an inline icon on every page, so no browser asks for /favicon.ico (a 404 in every log)", async () => {
    for (const html of [
      await (await page("/admin/login")).text(),
      await (await page("/admin", { headers: { cookie: await sessionCookie() } })).text(),
    ]) {
      expect(html).toMatch(/<link rel="icon" href="data:image\/svg\+xml,[^"]+"\/?>/);
    }
  });

  it('serves the stylesheet byte for byte: no HTML escaping inside <style>, which would drop rules holding > or "', async () => {
    const html = await (await page("/admin/login")).text();
    const served = /<style>([\s\S]*?)<\/style>/.exec(html)?.[1];
    expect(served).toBe(STYLE);
    expect(served).toContain("td > .badge");
    expect(served).toContain('"Segoe UI"');
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
    const empty = await (
      await page(`/admin/receipts?source=${source}&status=processed`, { headers: { cookie } })
    ).text();
    expect(empty).toContain("No receipts match.");
    const invalid = await page(`/admin/receipts?source=${source}&status=bogus`, { headers: { cookie } });
    expect(invalid.status).toBe(400);
    const invalidHtml = await invalid.text();
    expect(invalidHtml).toContain("must be a comma-separated list");
    // The form stays, with what was typed, so the operator can fix the filter.
    expect(invalidHtml).toContain('<form class="filters"');
    expect(invalidHtml).toContain(`value="${source}"`);
    expect(invalidHtml).not.toContain('id="receipts"');

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
    expect(replayed.headers.get("location")).toBe(`/admin/receipts/${single.receiptId}`);
    const flash = flashCookie(replayed);
    const shown = await (
      await page(`/admin/receipts/${single.receiptId}`, { headers: { cookie: `${cookie}; ${flash}` } })
    ).text();
    expect(shown).toContain("Replayed: the receipt is back on the queue.");

    const [a, b] = [await seedDead(), await seedDead()];
    const bulk = await page(
      "/admin/dead/action",
      form([
        ["action", "replay"],
        ["receiptId", a.receiptId],
        ["receiptId", b.receiptId],
      ]),
    );
    expect(bulk.headers.get("location")).toBe("/admin/dead");
    expect(decodeURIComponent(flashCookie(bulk))).toContain("2 receipts replayed.");

    for (const dead of [single, a, b]) {
      await waitForStatus("admin-audit", dead.eventKey);
      expect((await account(dead.accountId))?.credits).toBe(3);
    }
    const crossSite = await page(`/admin/receipts/${single.receiptId}/replay`, {
      ...form([]),
      headers: { cookie, origin: "https://evil.example", "content-type": "application/x-www-form-urlencoded" },
    });
    expect(crossSite.status).toBe(403);
  });

  it("says why a receipt offers no action, instead of an empty Actions heading (as right after a replay)", async () => {
    const cookie = await sessionCookie();
    const source = uniqueSource("dash-actions");
    const pending = await seedReceipt({ source, receivedAt: Date.now(), status: "pending" });
    const bodyDropped = await seedReceipt({ source, receivedAt: Date.now(), status: "processed" });
    const actions = async (receiptId: string) =>
      /<h2>Actions<\/h2>\s*(<[^>]*>[^<]*)/.exec(
        await (await page(`/admin/receipts/${receiptId}`, { headers: { cookie } })).text(),
      )?.[1];
    expect(await actions(pending)).toBe(
      '<p class="muted" id="no-actions">None while it is pending: reload to see how it finishes.',
    );
    expect(await actions(bodyDropped)).toBe(
      '<p class="muted" id="no-actions">None: its body is no longer kept, so it cannot be replayed.',
    );
  });
});

describe("dashboard: health, dead letters, alerts, charts", () => {
  const form = (cookie: string, fields: [string, string][]) => ({
    method: "POST",
    body: new URLSearchParams(fields),
    headers: { cookie, origin: ORIGIN, "content-type": "application/x-www-form-urlencoded" },
  });

  it("explains a failing source, and dismissing its dead letter turns it back to ok; restore undoes it", async () => {
    const cookie = await sessionCookie();
    const source = uniqueSource("dash-health");
    const receivedAt = Date.now() - 10 * 60_000;
    await seedReceipt({
      source,
      receivedAt,
      status: "processed",
      processedAt: receivedAt + 50,
      leaseGeneration: 1,
      attemptStartedAt: receivedAt + 20,
      attemptDurationMs: 30,
    });
    await seedReceipt({
      source,
      receivedAt,
      status: "skipped",
      processedAt: receivedAt + 50,
      lastError: "no handler for type account.closed",
    });
    const dead = await seedReceipt({
      source,
      receivedAt,
      status: "dead",
      lastError: "data.amount must be an integer",
      body: Buffer.from("{}"),
    });

    const failing = await (await page(`/admin/sources/${source}`, { headers: { cookie } })).text();
    expect(failing).toContain('<span class="badge failing">failing</span>');
    expect(failing).toMatch(
      /id="health-reasons"[\s\S]*1 dead letter waiting[\s\S]*href="\/admin\/dead\?source=dash-health-/,
    );
    // The charts are SVG drawn on the server, one per series.
    for (const id of [
      "chart-received",
      "chart-processed",
      "chart-dead",
      "chart-rejected",
      "chart-pickup",
      "chart-processing",
    ]) {
      expect(failing).toMatch(new RegExp(`id="${id}"[^>]*>[\\s\\S]*?<svg`));
    }
    expect(failing).toMatch(/id="chart-received" data-total="3"/);
    expect(failing).toMatch(/id="chart-dead" data-total="1"/);
    // Each chart's time axis ends at "now", right-aligned at the plot's right edge, after its hour labels.
    for (const id of ["chart-received", "chart-pickup"]) {
      const svg = new RegExp(`id="${id}"[^>]*>[\\s\\S]*?(<svg[\\s\\S]*?</svg>)`).exec(failing)![1]!;
      const labels = [...svg.matchAll(/<text x="([\d.]+)" y="([\d.]+)" text-anchor="(\w+)">([^<]*)<\/text>/g)].filter(
        (match) => match[2] === "134",
      ); // the x axis: y = HEIGHT - 6
      expect(labels.at(-1)?.slice(3), id).toEqual(["end", "now"]);
      expect(
        labels.slice(0, -1).every((label) => /^\d{2}:00$/.test(label[4]!)),
        id,
      ).toBe(true);
    }
    expect(failing).toContain("Not stored in D1: a rejected delivery writes nothing");
    expect(failing).toMatch(/id="skipped"[\s\S]*?>1</);

    const overview = await (await page("/admin", { headers: { cookie } })).text();
    expect(overview).toMatch(new RegExp(`data-source="${source}"[\\s\\S]*?data-label="Skipped"`));

    const receipts = await (
      await page(`/admin/receipts?source=${source}&status=skipped`, { headers: { cookie } })
    ).text();
    expect(receipts).toContain("no handler for type account.closed");

    const dismissed = await page(
      "/admin/dead/action",
      form(cookie, [
        ["action", "dismiss"],
        ["receiptId", dead],
      ]),
    );
    expect(dismissed.status).toBe(303);
    expect(dismissed.headers.get("location")).toBe(`/admin/receipts/${dead}`);
    expect(decodeURIComponent(flashCookie(dismissed))).toContain("1 dead letter dismissed.");
    const ok = await (await page(`/admin/sources/${source}`, { headers: { cookie } })).text();
    expect(ok).toContain('<span class="badge ok">ok</span>');
    expect(ok).not.toContain('id="health-reasons"');
    const deadList = await (await page(`/admin/dead?source=${source}`, { headers: { cookie } })).text();
    expect(deadList).not.toContain(dead);
    const dismissedList = await (
      await page(`/admin/dead?source=${source}&show=dismissed`, { headers: { cookie } })
    ).text();
    expect(dismissedList).toContain(dead);
    expect(await (await page(`/admin/receipts/${dead}`, { headers: { cookie } })).text()).toContain(
      "Dismissed by an operator",
    );

    const restored = await page(
      "/admin/dead/action",
      form(cookie, [
        ["action", "restore"],
        ["receiptId", dead],
      ]),
    );
    expect(restored.status).toBe(303);
    expect(await (await page(`/admin/sources/${source}`, { headers: { cookie } })).text()).toContain(
      '<span class="badge failing">failing</span>',
    );

    // The timeline keeps both operator actions, in order: the dismissal and then the restore, each at its time.
    const detail = await (await adminGet(`/admin/api/receipts/${dead}`)).json<{
      receipt: { status: string; dismissedAt: number | null; restoredAt: number | null };
      attempts: unknown[];
      replays: unknown[];
    }>();
    expect(detail.receipt.status).toBe("dead");
    expect(detail.receipt.dismissedAt).toEqual(expect.any(Number));
    expect(detail.receipt.restoredAt).toBeGreaterThanOrEqual(detail.receipt.dismissedAt!);
    const timelineHtml = /<ol class="timeline" id="timeline">([\s\S]*?)<\/ol>/.exec(
      await (await page(`/admin/receipts/${dead}`, { headers: { cookie } })).text(),
    )![1]!;
    expect(timelineHtml).toMatch(/Dismissed by an operator[\s\S]*Restored by an operator: a dead letter again/);
    // Restoring wrote the receipt's row and nothing else: no attempt, no replay, no second receipt.
    expect([detail.attempts, detail.replays]).toEqual([[], []]);
    const rows = await env.DB.prepare(
      "SELECT (SELECT COUNT(*) FROM receipts WHERE source = ?1) + (SELECT COUNT(*) FROM attempts WHERE receipt_id = ?2) + (SELECT COUNT(*) FROM replays WHERE receipt_id = ?2) AS n",
    )
      .bind(source, dead)
      .first<{ n: number }>();
    expect(rows?.n).toBe(3);
  });

  it("shows a flash message once: a reload no longer carries it", async () => {
    const cookie = await sessionCookie();
    const posted = await page("/admin/dead/action", form(cookie, [["action", "dismiss"]]));
    const flash = flashCookie(posted);
    const first = await page("/admin/dead", { headers: { cookie: `${cookie}; ${flash}` } });
    expect(await first.text()).toContain("Nothing selected");
    // The page that showed it deletes it, so the browser does not send it again.
    expect(first.headers.getSetCookie().some((value) => /^admin_flash=;/.test(value) && /Max-Age=0/i.test(value))).toBe(
      true,
    );
    expect(await (await page("/admin/dead", { headers: { cookie } })).text()).not.toContain('class="flash"');
  });

  it("filters dead letters and pages receipts in both directions", async () => {
    const cookie = await sessionCookie();
    const source = uniqueSource("dash-pages");
    const t0 = Date.now() - 60 * 60_000;
    const ids: string[] = [];
    for (let index = 0; index < 5; index++)
      ids.push(
        await seedReceipt({
          source,
          receivedAt: t0 + index * 1000,
          status: "dead",
          eventType: index % 2 ? "odd" : "even",
        }),
      );
    const byType = await (await page(`/admin/dead?source=${source}&type=odd`, { headers: { cookie } })).text();
    expect(ids.filter((id) => byType.includes(`data-receipt="${id}"`))).toEqual([ids[1], ids[3]]);
    const bad = await page(`/admin/dead?source=${source}&since=yesterday-ish`, { headers: { cookie } });
    expect(bad.status).toBe(400);
    expect(await bad.text()).toMatch(/id="filter-problem"[^>]*>Query parameter &quot;since&quot;/);

    const rowsOf = (html: string) => ids.filter((id) => html.includes(`data-receipt="${id}"`));
    const first = await (await page(`/admin/receipts?source=${source}&limit=2`, { headers: { cookie } })).text();
    expect(rowsOf(first)).toEqual([ids[3], ids[4]]);
    expect(first).not.toContain('id="prev-page"');
    const older = /id="next-page" href="([^"]+)"/.exec(first)![1]!.replaceAll("&amp;", "&");
    const second = await (await page(older, { headers: { cookie } })).text();
    expect(rowsOf(second)).toEqual([ids[1], ids[2]]);
    const newer = /id="prev-page" href="([^"]+)"/.exec(second)![1]!.replaceAll("&amp;", "&");
    const back = await (await page(newer, { headers: { cookie } })).text();
    expect(rowsOf(back)).toEqual([ids[3], ids[4]]);
    expect(back).not.toContain('id="prev-page"');
  });

  it("writes alerts as sentences, linked to what they concern", async () => {
    const cookie = await sessionCookie();
    const source = uniqueSource("dash-alerts");
    await seedAlert({
      source,
      kind: "dead-letters",
      openedAt: Date.now(),
      detail: JSON.stringify({
        message: "3 new dead letters since the last run",
        facts: { baseline: 1, dead: 4, oldestAgeMs: 90_000 },
      }),
    });
    const html = await (await page(`/admin/alerts?source=${source}`, { headers: { cookie } })).text();
    expect(html).toContain("3 new dead letters since the last run");
    // The numbers behind the sentence, readable: names as words, durations as durations.
    expect(html).toContain('<div class="muted alert-facts">baseline 1 · dead 4 · oldest age 90.0 s</div>');
    expect(html).not.toMatch(/"message"|&quot;message&quot;/);
    expect(html).toContain(`href="/admin/dead?source=${source}"`);
    const api = await exports.default.fetch(
      new Request(`${ORIGIN}/admin/api/alerts?source=${source}`, {
        headers: { authorization: `Bearer ${env.ADMIN_TOKEN}` },
      }),
    );
    const body = await api.json<{ alerts: { message: string; facts: Record<string, number> }[] }>();
    expect(body.alerts[0]).toMatchObject({ message: "3 new dead letters since the last run", facts: { baseline: 1 } });
    expect(body.alerts[0]).not.toHaveProperty("detail");
  });
});
