import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { app } from "../../src/app";
import { signDemo } from "../support/deliveries";

/**
 * A valid source whose secret is not set answers 503 to every delivery; /health says so by source name, without
 * naming the secret (the route is unauthenticated), and a source that still has one secret of a rotation is fine.
 */

const tables = env.SOURCES as Record<string, Record<string, unknown>>;
// Only sources whose secrets are set, plus the three below (some fixtures leave a secret unset on purpose).
const fullySet = { ...env, SOURCES: { demo: tables.demo } } as Env;
const withUnsetSecret = {
  ...env,
  SOURCES: {
    demo: tables.demo,
    "secret-unset": { provider: "standard-webhooks", secrets: ["NEVER_SET_WHSEC"], destination: "none" },
    "token-unset": { ...tables.demo, verify_token: "NEVER_SET_TOKEN" },
    "half-rotated": {
      provider: "standard-webhooks",
      secrets: ["DEMO_WEBHOOK_SECRET", "NEVER_SET_OLD_WHSEC"],
      destination: "none",
    },
  },
} as Env;

async function fetchWith(testEnv: Env, request: Request): Promise<Response> {
  return await app.fetch(request, testEnv);
}

describe("a source whose secret is not set", () => {
  it("is named in a degraded /health while its deliveries answer 503, and only then", async () => {
    const healthy = await (await fetchWith(fullySet, new Request("https://receiver.test/health"))).json();
    expect(healthy).toEqual({ status: "ok" });

    const body = JSON.stringify({ type: "thing.happened", data: {} });
    const refused = await fetchWith(
      withUnsetSecret,
      new Request("https://receiver.test/webhooks/secret-unset", {
        method: "POST",
        body,
        headers: signDemo("msg_unset_1", body),
      }),
    );
    expect(refused.status).toBe(503);
    expect(await refused.json()).toMatchObject({ error: { code: "source_secret_missing" } });
    const rotated = await fetchWith(
      withUnsetSecret,
      new Request("https://receiver.test/webhooks/half-rotated", {
        method: "POST",
        body,
        headers: signDemo("msg_unset_2", body),
      }),
    );
    expect(rotated.status).toBe(200);

    const degraded = await fetchWith(withUnsetSecret, new Request("https://receiver.test/health"));
    expect(degraded.status).toBe(200);
    const answer = await degraded.json<{ status: string; reasons: string[]; sourcesMissingSecrets: string[] }>();
    expect(answer).toMatchObject({
      status: "degraded",
      reasons: ["secrets-missing"],
      sourcesMissingSecrets: ["secret-unset", "token-unset"],
    });
    expect(JSON.stringify(answer)).not.toMatch(/NEVER_SET/);

    // Behind the admin token, which secret each lacks and so what to set.
    const admin = { authorization: `Bearer ${env.ADMIN_TOKEN}` };
    const sources = await (
      await fetchWith(withUnsetSecret, new Request("https://receiver.test/admin/api/sources", { headers: admin }))
    ).json<{ missingSecrets: Record<string, string[]> }>();
    expect(sources.missingSecrets).toEqual({ "secret-unset": ["NEVER_SET_WHSEC"], "token-unset": ["NEVER_SET_TOKEN"] });
    const health = await (
      await fetchWith(withUnsetSecret, new Request("https://receiver.test/admin/api/health", { headers: admin }))
    ).json<{ reasons: string[]; missingSecrets: Record<string, string[]> }>();
    expect(health.reasons).toContain("secrets-missing");
    expect(health.missingSecrets).toEqual(sources.missingSecrets);
  });
});
