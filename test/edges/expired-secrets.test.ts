import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { app } from "../../src/app";
import { post, signDemo } from "../support/deliveries";

/**
 * A source whose only signing secret is past its `expires` (test/fixtures/sources/edges.json) cannot verify
 * anything: a configuration problem, so it answers 503 (the sender retries), never a 401 the sender takes as a
 * verdict, and /health says so by source name.
 */

const admin = { authorization: `Bearer ${env.ADMIN_TOKEN}` };
const tables = env.SOURCES as Record<string, unknown>;
// Health answers for this source and the demo alone: /admin/api/health asks every shard of every source its size,
// which across all the fixture sources is slow, and other fixtures leave secrets unset on purpose.
const twoSources = { ...env, SOURCES: { demo: tables.demo, "edges-expired": tables["edges-expired"] } } as Env;
const get = (path: string, headers: Record<string, string> = {}) =>
  app.fetch(new Request(`https://receiver.test${path}`, { headers }), twoSources);

describe("a source every secret of which has expired", () => {
  it("answers 503 source_secrets_expired even to a delivery signed with that secret, and to an unsigned one", async () => {
    const body = JSON.stringify({ type: "thing.happened", data: {} });
    const signed = await post(
      "/webhooks/edges-expired",
      body,
      signDemo("msg_expired_1", body, undefined, (env as unknown as Record<string, string>).EDGES_EXPIRED_SECRET),
    );
    expect(signed.status).toBe(503);
    expect(await signed.json()).toMatchObject({ error: { code: "source_secrets_expired" } });

    const unsigned = await post("/webhooks/edges-expired", body, { "content-type": "application/json" });
    expect(unsigned.status).toBe(503);
    await unsigned.body?.cancel();
  });

  it("is reported as degraded in /health by source name only, and by secret name behind the admin token", async () => {
    const health = await (await get("/health")).json<{
      status: string;
      reasons: string[];
      sourcesWithExpiredSecrets?: string[];
    }>();
    expect(health.status).toBe("degraded");
    expect(health.reasons).toEqual(["secrets-expired"]);
    expect(health.sourcesWithExpiredSecrets).toEqual(["edges-expired"]);
    expect(JSON.stringify(health)).not.toContain("EDGES_EXPIRED_SECRET");

    const sources = await (await get("/admin/api/sources", admin)).json<{
      valid: string[];
      expiredSecrets: Record<string, string[]>;
      missingSecrets: Record<string, string[]>;
    }>();
    expect(sources.expiredSecrets["edges-expired"]).toEqual(["EDGES_EXPIRED_SECRET"]);
    // Expired is not missing, and a source with a live secret is not listed.
    expect(sources.missingSecrets).toEqual({});
    expect(Object.keys(sources.expiredSecrets)).toEqual(["edges-expired"]);

    const system = await (await get("/admin/api/health", admin)).json<{
      reasons: string[];
      expiredSecrets: Record<string, string[]>;
    }>();
    expect(system.reasons).toContain("secrets-expired");
    expect(system.expiredSecrets).toEqual(sources.expiredSecrets);
  });
});
