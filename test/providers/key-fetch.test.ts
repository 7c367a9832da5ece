import { env } from "cloudflare:workers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { fetchPinned, KeyCache, redirectKeyFetchesForTests, type Fetched } from "../../src/providers/key-fetch";
import { keyStandinOrigin } from "./support/key-standin";

/** The pieces every fetched-key sender shares: the test-only redirect's guards, the per-isolate cache, the outcomes. */

describe("redirectKeyFetchesForTests: honoured only in tests, only to loopback", () => {
  it("refuses without the TEST_KEY_STANDIN binding, and any origin that is not http://127.0.0.1:<port>", () => {
    expect(() => redirectKeyFetchesForTests({}, keyStandinOrigin())).toThrow(/TEST_KEY_STANDIN/);
    expect(() => redirectKeyFetchesForTests({ TEST_KEY_STANDIN: "yes" }, keyStandinOrigin())).toThrow(/TEST_KEY_STANDIN/);
    for (const origin of ["https://attacker.test", "http://127.0.0.1.attacker.test:80", "http://localhost:8080", "http://127.0.0.1:80/path"]) {
      expect(() => redirectKeyFetchesForTests(env, origin)).toThrow(/loopback/);
    }
  });
});

describe("KeyCache", () => {
  it("concurrent requests for one key share one load; a found key is kept", async () => {
    const cache = new KeyCache<string>();
    let loads = 0;
    const load = async (): Promise<Fetched<string>> => {
      loads += 1;
      await new Promise((resolve) => setTimeout(resolve, 20));
      return { kind: "found", value: "key" };
    };
    const outcomes = await Promise.all(Array.from({ length: 5 }, () => cache.get("kid", load)));
    expect(outcomes.every((outcome) => outcome.kind === "found")).toBe(true);
    await cache.get("kid", load);
    expect(loads).toBe(1);
  });

  it("never keeps a failure or a refusal, and a load that throws is unavailable", async () => {
    const cache = new KeyCache<string>();
    const answers: Fetched<string>[] = [{ kind: "unavailable" }, { kind: "refused" }, { kind: "found", value: "late" }];
    const seen = [];
    for (let i = 0; i < 3; i++) seen.push((await cache.get("kid", async () => answers[i]!)).kind);
    expect(seen).toEqual(["unavailable", "refused", "found"]);
    expect((await cache.get("other", async () => Promise.reject(new Error("boom")))).kind).toBe("unavailable");
  });
});

describe("fetchPinned: what the key host's answer means", () => {
  beforeAll(() => redirectKeyFetchesForTests(env, keyStandinOrigin()));
  afterAll(() => redirectKeyFetchesForTests(env, null));
  const read = async (response: Response): Promise<Fetched<string>> => ({ kind: "found", value: await response.text() });
  const at = (path: string) => fetchPinned(new URL(`https://sns.us-east-1.amazonaws.com${path}`), { method: "GET" }, read);

  it("a 4xx is a refusal (no such key), but 408 and 429 are a host to retry later", async () => {
    expect((await at("/status-404/key.pem")).kind).toBe("refused");
    expect((await at("/status-403/key.pem")).kind).toBe("refused");
    expect((await at("/status-408/key.pem")).kind).toBe("unavailable");
    expect((await at("/status-429/key.pem")).kind).toBe("unavailable");
  });

  // A host that never answers in time is covered through the route in aws-sns.test.ts (the stand-in's /hang/).
  it("a 5xx, or a redirect (never followed off the pinned host), is unavailable", async () => {
    expect((await at("/status-500/key.pem")).kind).toBe("unavailable");
    expect((await at("/status-503/key.pem")).kind).toBe("unavailable");
    expect((await at("/status-302/key.pem")).kind).toBe("unavailable");
  });
});
