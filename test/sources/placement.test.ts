import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { app } from "../../src/app";
import { placementOf, shardFor, shardsOf, stubOptions } from "../../src/claims/routing";
import { loadSources } from "../../src/sources/registry";
import { credit, post, signDemo } from "../support/deliveries";

/**
 * Where claim shards are created. Local workerd accepts a location hint (and ignores it) but throws on
 * `namespace.jurisdiction()` ("not implemented in workerd"), so the jurisdiction is proved on a namespace that
 * records how the stub was obtained and hands the real objects back.
 */

type Call = { call: "jurisdiction" | "idFromName" | "get"; arg: unknown; scope: string };

/** Wraps the real namespace; `jurisdiction(j)` returns another recording wrapper of it, labelled j. */
function recordingNamespace(real: Env["CLAIM_SHARDS"], calls: Call[], scope = "global"): Env["CLAIM_SHARDS"] {
  return new Proxy(real, {
    get(target, property) {
      if (property === "jurisdiction") {
        return (jurisdiction: string) => {
          calls.push({ call: "jurisdiction", arg: jurisdiction, scope });
          return recordingNamespace(real, calls, jurisdiction);
        };
      }
      if (property === "idFromName") {
        return (name: string) => {
          calls.push({ call: "idFromName", arg: name, scope });
          return target.idFromName(name);
        };
      }
      if (property === "get") {
        return (id: DurableObjectId, options?: unknown) => {
          calls.push({ call: "get", arg: options, scope });
          return target.get(id);
        };
      }
      return Reflect.get(target, property);
    },
  });
}

const placedSources = {
  ...(env.SOURCES as Record<string, unknown>),
  "placed-eu": {
    provider: "standard-webhooks",
    secrets: ["DEMO_WEBHOOK_SECRET"],
    destination: "none",
    location_hint: "weur",
    jurisdiction: "eu",
  },
};

describe("claim shard placement", () => {
  it("turns a placement into the namespace and get options", () => {
    expect(stubOptions({ locationHint: null, jurisdiction: null })).toEqual({ jurisdiction: null, get: undefined });
    expect(stubOptions({ locationHint: "apac", jurisdiction: null })).toEqual({
      jurisdiction: null,
      get: { locationHint: "apac" },
    });
    expect(stubOptions({ locationHint: "weur", jurisdiction: "eu" })).toEqual({
      jurisdiction: "eu",
      get: { locationHint: "weur" },
    });
  });

  it("finds the same placement by name as from the config, and none for an unknown source", () => {
    const source = loadSources(env).get("placed-weur")!;
    expect(source.placement).toEqual({ locationHint: "weur", jurisdiction: null });
    expect(placementOf(env, "placed-weur")).toEqual(source.placement);
    expect(placementOf(env, "demo")).toEqual({ locationHint: null, jurisdiction: null });
    expect(placementOf(env, "never-configured")).toEqual({ locationHint: null, jurisdiction: null });
  });

  it("obtains the claiming shard's stub with the source's location hint, on the live route", async () => {
    const calls: Call[] = [];
    const recordingEnv: Env = { ...env, CLAIM_SHARDS: recordingNamespace(env.CLAIM_SHARDS, calls) };
    const body = JSON.stringify(credit("acct_placed_weur", 1));
    const response = await app.fetch(
      new Request("https://receiver.test/webhooks/placed-weur", {
        method: "POST",
        body,
        headers: signDemo("msg_placed_weur", body),
      }),
      recordingEnv,
    );
    expect(response.status).toBe(200);
    const first = await response.json<{ status: string; receipt: string }>();
    expect(first.status).toBe("accepted");
    expect(calls.filter((call) => call.call !== "idFromName")).toEqual([
      { call: "get", arg: { locationHint: "weur" }, scope: "global" },
    ]);
    // A resend through the Worker's own bindings reaches the same shard: it answers with the first receipt.
    const again = await post("/webhooks/placed-weur", body, signDemo("msg_placed_weur", body));
    expect(await again.json()).toEqual({ status: "duplicate", receipt: first.receipt });
  });

  it("asks a jurisdiction's namespace for the id, on every path to a source's shards", () => {
    const calls: Call[] = [];
    const recordingEnv: Env = {
      ...env,
      SOURCES: placedSources,
      CLAIM_SHARDS: recordingNamespace(env.CLAIM_SHARDS, calls),
    };
    shardFor(recordingEnv, "placed-eu", "evt_1");
    shardFor(recordingEnv, loadSources(recordingEnv).get("placed-eu")!, "evt_1");
    expect(calls).toHaveLength(6);
    for (let i = 0; i < calls.length; i += 3) {
      expect(calls.slice(i, i + 3)).toEqual([
        { call: "jurisdiction", arg: "eu", scope: "global" },
        { call: "idFromName", arg: expect.stringMatching(/^placed-eu#\d+$/), scope: "eu" },
        { call: "get", arg: { locationHint: "weur" }, scope: "eu" },
      ]);
    }

    calls.length = 0;
    const all = shardsOf(recordingEnv, "placed-eu");
    expect(all).toHaveLength(Number(env.CLAIM_SHARD_COUNT));
    expect(calls.filter((call) => call.call === "get")).toEqual(
      all.map(() => ({ call: "get", arg: { locationHint: "weur" }, scope: "eu" })),
    );
    expect(calls.filter((call) => call.call === "idFromName").every((call) => call.scope === "eu")).toBe(true);
  });

  it("leaves a source without placement on the plain namespace, with no options", () => {
    const calls: Call[] = [];
    const recordingEnv: Env = { ...env, CLAIM_SHARDS: recordingNamespace(env.CLAIM_SHARDS, calls) };
    shardFor(recordingEnv, "demo", "evt_plain");
    expect(calls).toEqual([
      { call: "idFromName", arg: expect.stringMatching(/^demo#\d+$/), scope: "global" },
      { call: "get", arg: undefined, scope: "global" },
    ]);
  });
});
