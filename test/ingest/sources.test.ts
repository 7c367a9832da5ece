import { env } from "cloudflare:workers";
import { beforeEach, describe, expect, it } from "vitest";
import { app } from "../../src/app";
import { handlerNames } from "../../src/consumers/handlers/registry";
import { knownProviderNames } from "../../src/providers/registry";
import { MAX_BODY_BYTES_LIMIT, parseSources, SourceConfigError } from "../../src/sources/config";
import { credit, post, signDemo } from "../support/deliveries";
import { settle, snapshot } from "../support/storage";

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

describe("source configuration", () => {
  it("refuses a body cap the claim shard and D1 could not store", () => {
    const source = (maxBodyBytes: unknown) => ({ big: { provider: "standard-webhooks", secrets: ["S"], max_body_bytes: maxBodyBytes } });
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

  it("answers 503 and writes nothing when an oversized cap is deployed", async () => {
    await settle();
    const before = await snapshot();
    const body = JSON.stringify(credit("acct_oversized_cap", 1));
    const sources = { ...(env.SOURCES as Record<string, unknown>), huge: { provider: "standard-webhooks", secrets: ["DEMO_WEBHOOK_SECRET"], max_body_bytes: 4_000_000 } };
    const response = await app.fetch(
      new Request("https://receiver.test/webhooks/demo", { method: "POST", body, headers: signDemo("msg_oversized_cap", body) }),
      { ...env, SOURCES: sources },
    );
    expect(response.status).toBe(503);
    expect(await snapshot()).toEqual(before);
  });
});

describe("secrets by name", () => {
  beforeEach(settle);

  it("answers 503 (the sender retries) when a source's secret was never set, and writes nothing", async () => {
    const before = await snapshot();
    const body = JSON.stringify(credit("acct_secret_not_set", 1));
    const response = await post("/webhooks/secret-not-set", body, signDemo("msg_secret_not_set", body));
    expect(response.status).toBe(503);
    expect((await response.json<{ error: { code: string; message: string } }>()).error).toEqual({
      code: "source_secret_missing",
      message: expect.not.stringContaining("INGEST_SECRET_NEVER_SET"),
    });
    expect(await snapshot()).toEqual(before);
  });

  it("accepts the current and the previous secret during a rotation, and refuses one past its expiry", async () => {
    const body = JSON.stringify(credit("acct_rotation", 1));
    const current = await post("/webhooks/rotating", body, signDemo("msg_rotation_current", body));
    expect(current.status).toBe(200);
    const previous = await post("/webhooks/rotating", body, signDemo("msg_rotation_previous", body, undefined, secrets.INGEST_PREVIOUS_SECRET));
    expect(previous.status).toBe(200);

    await settle();
    const before = await snapshot();
    const retired = await post("/webhooks/rotating", body, signDemo("msg_rotation_retired", body, undefined, secrets.INGEST_RETIRED_SECRET));
    expect(retired.status).toBe(401);
    expect(await snapshot()).toEqual(before);
  });
});
