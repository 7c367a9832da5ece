import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { issueSession } from "../../src/admin/guards/auth";
import { app } from "../../src/app";
import { ADMIN, seedReceipt } from "./support";

/** A broken source table, as operators see it: /health names it, the admin API and the dashboard say why. */

const brokenEnv = {
  ...env,
  SOURCES: {
    ...(env.SOURCES as Record<string, unknown>),
    "billing-typo": {
      provider: "standard-webhooks",
      secrets: ["DEMO_WEBHOOK_SECRET"],
      destination: "handler:billing",
      forward_timeout: "10m",
    },
  },
};

const fullySet = { ...env, SOURCES: { demo: (env.SOURCES as Record<string, unknown>).demo } } as Env;

async function fetchWith(testEnv: Env, path: string, headers: Record<string, string> = {}): Promise<Response> {
  return await app.fetch(new Request(`https://receiver.test${path}`, { headers, redirect: "manual" }), testEnv);
}

describe("a broken source, as operators see it", () => {
  it("/health is ok when every table is valid, and names the broken source (only its name) when one is not", async () => {
    // Sources whose secrets are all set (some fixtures leave a secret unset on purpose, which /health reports).
    expect(await (await fetchWith(fullySet, "/health")).json()).toEqual({ status: "ok" });

    const degraded = await fetchWith(brokenEnv, "/health");
    expect(degraded.status).toBe(200);
    const body = await degraded.json<{ status: string; invalidSources: string[] }>();
    expect(body).toMatchObject({ status: "degraded", invalidSources: ["billing-typo"] });
    // Unauthenticated: the problems themselves (handler names, values) stay behind the admin token.
    expect(JSON.stringify(body)).not.toMatch(/handler|forward_timeout|DEMO_WEBHOOK_SECRET/);
  });

  it("/admin/api/sources lists the valid sources and every problem of the broken one", async () => {
    expect((await fetchWith(brokenEnv, "/admin/api/sources")).status).toBe(401);
    const response = await fetchWith(brokenEnv, "/admin/api/sources", ADMIN);
    expect(response.status).toBe(200);
    const body = await response.json<{ valid: string[]; invalid: Record<string, string[]>; unreadable: unknown }>();
    expect(body.valid).toContain("demo");
    expect(body.valid).not.toContain("billing-typo");
    expect(body.unreadable).toBeNull();
    expect(body.invalid).toEqual({
      "billing-typo": [
        expect.stringMatching(/^SOURCES\.billing-typo: forward_timeout must be at most 4m/),
        'SOURCES.billing-typo: no handler named "billing" is registered',
      ],
    });
  });

  it("the dashboard shows the configuration error instead of calling a source no longer configured", async () => {
    const cookie = `admin_session=${await issueSession(env.ADMIN_TOKEN)}`;
    const demoBroken = {
      ...env,
      SOURCES: {
        ...(env.SOURCES as Record<string, Record<string, unknown>>),
        demo: { ...(env.SOURCES as Record<string, Record<string, unknown>>).demo, jurisdiction: "mars" },
      },
    };
    // A receipt from before the bad deploy puts demo in the sources table, where it used to read "no longer configured".
    await seedReceipt({ source: "demo", receivedAt: Date.now() - 60_000 });
    const overview = await fetchWith(demoBroken, "/admin", { cookie });
    expect(overview.status).toBe(200);
    const html = await overview.text();
    expect(html).toContain('id="config-problems"');
    expect(html).toContain("SOURCES.demo: jurisdiction must be one of");
    const demoRow = /<tr data-source="demo">.*?<\/tr>/.exec(html)?.[0] ?? "";
    expect(demoRow.includes("(configuration invalid)"), "the demo row names the configuration problem").toBe(true);
    expect(html.includes("no longer configured"), "no source is called no longer configured").toBe(false);

    const sourcePage = await (await fetchWith(demoBroken, "/admin/sources/demo", { cookie })).text();
    expect(sourcePage).toContain("This source&#39;s configuration is invalid");
    expect(sourcePage).toContain("SOURCES.demo: jurisdiction must be one of");

    const healthy = await (await fetchWith(env, "/admin", { cookie })).text();
    expect(healthy).not.toContain('id="config-problems"');
  });
});
