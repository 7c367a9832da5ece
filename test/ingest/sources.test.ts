import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { app } from "../../src/app";
import { handlerNames } from "../../src/handlers/registry";
import { knownProviderNames } from "../../src/providers/registry";
import { MAX_BODY_BYTES_LIMIT, parseSources, SourceConfigError } from "../../src/sources/config";
import { loadSources, lookupSource, sourceProblems } from "../../src/sources/registry";
import { credit, post, signDemo } from "../support/deliveries";
import { expectUnchanged, settle, settleEachTest, snapshot } from "../support/storage";

const secrets = env as unknown as Record<string, string>;
const context = { knownProviders: knownProviderNames(), knownHandlers: handlerNames() };

function problemsOf(sources: unknown): string[] {
  try {
    parseSources(sources, context);
    return [];
  } catch (error) {
    if (error instanceof SourceConfigError) return error.problems;
    throw error;
  }
}

settleEachTest();

describe("source configuration", () => {
  it("refuses a body cap the claim shard and D1 could not store", () => {
    const source = (maxBodyBytes: unknown) => ({
      big: { provider: "standard-webhooks", secrets: ["S"], max_body_bytes: maxBodyBytes },
    });
    expect(problemsOf(source(MAX_BODY_BYTES_LIMIT))).toEqual([]);
    expect(parseSources(source(MAX_BODY_BYTES_LIMIT), context).get("big")?.maxBodyBytes).toBe(MAX_BODY_BYTES_LIMIT);
    for (const bad of [2_000_000, 10 * 1024 * 1024, 1024.5, "1mb", 0, -1]) {
      expect(problemsOf(source(bad)), String(bad)).toEqual([expect.stringContaining("max_body_bytes")]);
    }
  });

  it("names every problem at once, so one deploy fixes them all", () => {
    const problems = problemsOf({
      "Bad Name": { provider: "standard-webhooks", secrets: ["S"] },
      nosecrets: { provider: "standard-webhooks", secrets: [] },
      nohandler: { provider: "standard-webhooks", secrets: ["S"], destination: "handler:missing" },
      noprovider: { provider: "carrier-pigeon", secrets: ["S"] },
    });
    expect(problems).toHaveLength(4);
  });

  it("answers 503 and writes nothing for a source whose oversized cap is deployed", async () => {
    await settle();
    const before = await snapshot();
    const body = JSON.stringify(credit("acct_oversized_cap", 1));
    const sources = {
      ...(env.SOURCES as Record<string, unknown>),
      huge: { provider: "standard-webhooks", secrets: ["DEMO_WEBHOOK_SECRET"], max_body_bytes: 4_000_000 },
    };
    const response = await app.fetch(
      new Request("https://receiver.test/webhooks/huge", {
        method: "POST",
        body,
        headers: signDemo("msg_oversized_cap", body),
      }),
      { ...env, SOURCES: sources },
    );
    expect(response.status).toBe(503);
    await expectUnchanged(before);
  });
});

describe("one broken source fails alone", () => {
  const brokenSources = {
    ...(env.SOURCES as Record<string, unknown>),
    "broken-handler": {
      provider: "standard-webhooks",
      secrets: ["DEMO_WEBHOOK_SECRET"],
      destination: "handler:billing",
    },
    "broken-retry": {
      provider: "standard-webhooks",
      secrets: ["DEMO_WEBHOOK_SECRET"],
      retry: { max_retries: 2.5, max_age: "3 days" },
    },
  };
  const brokenEnv = { ...env, SOURCES: brokenSources };

  it("keeps every valid source and names each broken one with all its problems", () => {
    const valid = loadSources(brokenEnv);
    expect(valid.has("demo")).toBe(true);
    expect(valid.has("broken-handler")).toBe(false);
    expect(valid.has("broken-retry")).toBe(false);
    expect(valid.size).toBe(Object.keys(brokenSources).length - 2);
    expect(Object.fromEntries(sourceProblems(brokenEnv))).toEqual({
      "broken-handler": ['SOURCES.broken-handler: no handler named "billing" is registered'],
      "broken-retry": [expect.stringContaining("retry.max_retries"), expect.stringContaining("retry.max_age")],
    });
    expect(lookupSource(brokenEnv, "demo").kind).toBe("valid");
    expect(lookupSource(brokenEnv, "broken-retry")).toEqual({ kind: "invalid", problems: expect.any(Array) });
    expect(lookupSource(brokenEnv, "never-configured")).toEqual({ kind: "unknown" });
    expect(sourceProblems(env).size).toBe(0);
  });

  it("takes a source out when its catch_up table is broken, and only that source", () => {
    const sources = env.SOURCES as Record<string, Record<string, unknown>>;
    const withBadCatchUp = {
      ...env,
      SOURCES: { ...sources, "bad-catch-up": { ...sources.demo, catch_up: { api: "shopify" } } },
    };
    expect(lookupSource(withBadCatchUp, "bad-catch-up")).toEqual({
      kind: "invalid",
      problems: expect.arrayContaining([expect.stringContaining("catch_up.api ")]),
    });
    expect(lookupSource(withBadCatchUp, "demo").kind).toBe("valid");
  });

  it("answers 503 for the broken source and 200 for the others, each delivery under the same configuration", async () => {
    const deliver = (source: string, webhookId: string) => {
      const body = JSON.stringify(credit(`acct_${webhookId}`, 1));
      return app.fetch(
        new Request(`https://receiver.test/webhooks/${source}`, {
          method: "POST",
          body,
          headers: signDemo(webhookId, body),
        }),
        brokenEnv,
      );
    };
    const [broken, otherBroken, demo, capped] = await Promise.all([
      deliver("broken-handler", "msg_alone_broken"),
      deliver("broken-retry", "msg_alone_broken_retry"),
      deliver("demo", "msg_alone_demo"),
      deliver("capped", "msg_alone_capped"),
    ]);
    expect([broken.status, otherBroken.status, demo.status, capped.status]).toEqual([503, 503, 200, 200]);
    expect((await broken.json<{ error: { code: string } }>()).error.code).toBe("source_config_invalid");
    expect((await demo.json<{ status: string }>()).status).toBe("accepted");
  });
});

describe("secrets by name", () => {
  it("answers 503 (the sender retries) when a source's secret was never set, and writes nothing", async () => {
    const before = await snapshot();
    const body = JSON.stringify(credit("acct_secret_not_set", 1));
    const response = await post("/webhooks/secret-not-set", body, signDemo("msg_secret_not_set", body));
    expect(response.status).toBe(503);
    expect((await response.json<{ error: { code: string; message: string } }>()).error).toEqual({
      code: "source_secret_missing",
      message: expect.not.stringContaining("INGEST_SECRET_NEVER_SET"),
    });
    await expectUnchanged(before);
  });

  it("accepts the current and the previous secret during a rotation, and refuses one past its expiry", async () => {
    const body = JSON.stringify(credit("acct_rotation", 1));
    const current = await post("/webhooks/rotating", body, signDemo("msg_rotation_current", body));
    expect(current.status).toBe(200);
    const previous = await post(
      "/webhooks/rotating",
      body,
      signDemo("msg_rotation_previous", body, undefined, secrets.INGEST_PREVIOUS_SECRET),
    );
    expect(previous.status).toBe(200);

    await settle();
    const before = await snapshot();
    const retired = await post(
      "/webhooks/rotating",
      body,
      signDemo("msg_rotation_retired", body, undefined, secrets.INGEST_RETIRED_SECRET),
    );
    expect(retired.status).toBe(401);
    await expectUnchanged(before);
  });
});
