import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { type SystemHealth, summarizeSystem } from "../../src/admin/dashboard/system-summary";
import { issueSession } from "../../src/admin/guards/auth";
import { app } from "../../src/app";
import { D1_CAP_BYTES } from "../../src/monitor/conditions";
import { systemMonitor } from "../../src/monitor/report";
import { runCron } from "../reconcile/support";
import { unreachableD1 } from "../support/failpoints";

/**
 * The dashboard's System panel, through the real routes with a signed-in session: the system monitor's incidents
 * (raised by a real cron run against an unreachable D1), the receipt databases' sizes, and the sources that lack
 * a secret; one quiet line when all is well; and the overview still answering, with the panel, while D1 is down.
 */

const tables = env.SOURCES as Record<string, Record<string, unknown>>;
// Sources whose secrets are all set (some fixtures leave one unset on purpose), on both databases.
const fullySet = { ...env, SOURCES: { demo: tables.demo, "second-db": tables["second-db"] } } as Env;
const withUnsetSecret = {
  ...env,
  SOURCES: {
    ...tables,
    "syspanel-unset": { provider: "standard-webhooks", secrets: ["NEVER_SET_SYSPANEL_WHSEC"], destination: "none" },
  },
} as Env;

async function pageWith(testEnv: Env, path: string): Promise<Response> {
  const cookie = `admin_session=${await issueSession(env.ADMIN_TOKEN)}`;
  return await app.fetch(
    new Request(`https://receiver.test${path}`, { headers: { cookie }, redirect: "manual" }),
    testEnv,
  );
}

function section(html: string, id: string): string {
  return new RegExp(`<section id="${id}"[^>]*>.*?</section>`, "s").exec(html)?.[0] ?? "";
}

function databaseRow(html: string, binding: string): string {
  return new RegExp(`<tr data-database="${binding}"[^>]*>.*?</tr>`, "s").exec(html)?.[0] ?? "";
}

describe("the System panel", () => {
  // First: the incidents the later test raises live in this file's system monitor until they are recorded.
  it("is one quiet line with each database's size when all is well", async () => {
    const response = await pageWith(fullySet, "/admin");
    expect(response.status).toBe(200);
    const html = await response.text();
    const quiet = /<p[^>]*id="system-quiet"[^>]*>(.*?)<\/p>/s.exec(html)?.[1] ?? "";
    expect(quiet).toMatch(
      // The ring of receipt partitions (vitest.config.ts) sorts between the two.
      /^System: all well — DB \d+(\.\d+)? MB \(\d+\.\d %\)( · DB_P\d \d+(\.\d+)? MB \(\d+\.\d %\)){4} · DB_SECOND \d+(\.\d+)? MB \(\d+\.\d %\)\./,
    );
    expect(html).not.toContain('id="system-incidents"');
    expect(html).not.toContain('id="missing-secrets"');
    expect(html).not.toContain('id="database-sizes"');
    expect(html).toContain('id="sources"');
  });

  it("names each source lacking a secret with the secret's name (never a value), and sizes DB and DB_SECOND", async () => {
    const response = await pageWith(withUnsetSecret, "/admin");
    expect(response.status).toBe(200);
    const html = await response.text();
    const panel = section(html, "system");
    expect(panel).toContain("<h2>System</h2>");
    const missing = /<li data-missing-source="syspanel-unset">.*?<\/li>/s.exec(panel)?.[0] ?? "";
    expect(missing).toContain("<code>NEVER_SET_SYSPANEL_WHSEC</code>");
    // A source whose every secret has expired is listed apart, with the names it lists (the fixtures hold one).
    const expired = /<li data-expired-source="edges-expired">.*?<\/li>/s.exec(panel)?.[0] ?? "";
    expect(expired).toContain("<code>EDGES_EXPIRED_SECRET</code>");
    expect(panel).toContain('id="expired-secrets"');
    expect(html).not.toContain(env.DEMO_WEBHOOK_SECRET);
    for (const binding of ["DB", "DB_SECOND"]) {
      const row = databaseRow(panel, binding);
      expect(row, `${binding}'s size`).toMatch(/\d+(\.\d+)? MB.*\d+\.\d %/s);
      expect(row).not.toContain("near-cap");
    }
    expect(panel).toContain('href="/admin/system"');
  });

  it("shows an open incident with its message while D1 is down, then the resolved one muted, then the quiet line again", {
    timeout: 120_000,
  }, async () => {
    const broken = { ...env, DB: unreachableD1() } as Env;
    const now = Date.now();
    await runCron(now, broken);
    const raised = (await systemMonitor(env).list())
      .filter((incident) => incident.state === "open")
      .map((incident) => incident.kind);
    expect(raised.sort()).toEqual(["cron-failed", "d1-unreachable"]);

    // The overview reads its statistics from D1: they fail, the panel still says what the monitor knows.
    const down = await pageWith({ ...fullySet, DB: unreachableD1() } as Env, "/admin");
    expect(down.status).toBe(503);
    const html = await down.text();
    expect(html).toContain('id="stats-unavailable"');
    const incident = /<li data-incident="d1-unreachable">.*?<\/li>/s.exec(html)?.[0] ?? "";
    expect(incident).toContain("D1 unreachable");
    expect(incident).toContain("The cron could not reach D1 (DB)");
    expect(incident).toContain("not yet recorded in D1");
    expect(incident).toMatch(/since \d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ/);
    expect(databaseRow(html, "DB")).toContain("did not answer");
    expect(databaseRow(html, "DB")).toContain('class="silent"');
    expect(databaseRow(html, "DB_SECOND")).toMatch(/\d MB/);

    // Any other page that needs D1 fails as a page pointing at the System page, which answers without D1.
    const receipts = await pageWith({ ...fullySet, DB: unreachableD1() } as Env, "/admin/receipts");
    expect(receipts.status).toBe(500);
    expect(await receipts.text()).toContain('href="/admin/system"');
    const systemPage = await pageWith({ ...fullySet, DB: unreachableD1() } as Env, "/admin/system");
    expect(systemPage.status).toBe(200);
    const systemHtml = await systemPage.text();
    expect(systemHtml).toContain('data-incident="cron-failed"');
    expect(systemHtml).toMatch(
      /<p id="shard-sizes">16 shards hold [\d.]+ MB in all; the largest, <code>(demo|second-db)#\d<\/code>/,
    );

    // D1 answers a reporter again, but the resolution cannot be recorded yet: shown muted until it is.
    await systemMonitor(env).report([{ kind: "d1-unreachable", reporter: "cron", firing: false, message: "" }], {
      d1Reachable: false,
    });
    const resolving = await (await pageWith(fullySet, "/admin")).text();
    const resolved = /<ul[^>]*id="system-resolved"[^>]*>.*?<\/ul>/s.exec(resolving)?.[0] ?? "";
    expect(resolved).toContain('class="muted system-resolved"');
    expect(resolved).toContain("D1 unreachable resolved");
    expect(resolved).toContain("resolution not yet recorded in D1");
    const stillOpen = /<ul[^>]*id="system-incidents"[^>]*>.*?<\/ul>/s.exec(resolving)?.[0] ?? "";
    expect(stillOpen).toContain('data-incident="cron-failed"');
    expect(stillOpen).not.toContain('data-incident="d1-unreachable"');

    // A good cron run resolves cron-failed and records both in D1: the panel is quiet again.
    const quietSources = { ...env, SOURCES: { "bodies-r2-small": tables["bodies-r2-small"] } } as Env;
    await runCron(now + 600_000, quietSources);
    const recovered = await (await pageWith(fullySet, "/admin")).text();
    expect(recovered).toContain('id="system-quiet"');
    expect(recovered).not.toContain("data-incident=");
  });

  it("highlights a database above 80 % of its 10 GB, and a database that does not answer, as not all well", () => {
    const health = (bytes: (number | null)[]) =>
      ({
        systemAlerts: [],
        monitorError: null,
        missingSecrets: {},
        expiredSecrets: {},
        storage: {
          d1CapBytes: D1_CAP_BYTES,
          d1Databases: bytes.map((size, index) => ({ binding: `DB${index}`, bytes: size, usedFraction: null })),
        },
      }) as unknown as SystemHealth;
    const near = summarizeSystem(health([Math.floor(D1_CAP_BYTES * 0.81), 1024 ** 2]));
    expect(near.databases!.map((database) => database.state)).toEqual(["near-cap", "ok"]);
    expect(near.allWell).toBe(false);
    expect(summarizeSystem(health([Math.floor(D1_CAP_BYTES * 0.79)])).allWell).toBe(true);
    expect(summarizeSystem(health([null])).databases![0]!.state).toBe("silent");
    expect(summarizeSystem(health([null])).allWell).toBe(false);
  });
});
