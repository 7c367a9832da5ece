import { env } from "cloudflare:workers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  type Fetched,
  KeyCache,
  LOAD_WINDOW_MS,
  MAX_FETCHES_IN_FLIGHT,
  MAX_LOADS_PER_WINDOW,
  MAX_UNPROVEN_ENTRIES,
  REFUSAL_TTL_MS,
} from "../../src/providers/key-cache";
import { fetchPinned, redirectKeyFetchesForTests } from "../../src/providers/key-fetch";
import { keyStandinOrigin } from "./support/key-standin";

/** The pieces every fetched-key sender shares: the test-only redirect's guards, the per-isolate cache, the outcomes. */

describe("redirectKeyFetchesForTests: honoured only in tests, only to loopback", () => {
  it("refuses without the TEST_KEY_STANDIN binding, and any origin that is not http://127.0.0.1:<port>", () => {
    expect(() => redirectKeyFetchesForTests({}, keyStandinOrigin())).toThrow(/TEST_KEY_STANDIN/);
    expect(() => redirectKeyFetchesForTests({ TEST_KEY_STANDIN: "yes" }, keyStandinOrigin())).toThrow(
      /TEST_KEY_STANDIN/,
    );
    for (const origin of [
      "https://attacker.test",
      "http://127.0.0.1.attacker.test:80",
      "http://localhost:8080",
      "http://127.0.0.1:80/path",
    ]) {
      expect(() => redirectKeyFetchesForTests(env, origin)).toThrow(/loopback/);
    }
  });
});

describe("KeyCache", () => {
  const found = (value: string) => async (): Promise<Fetched<string>> => ({ kind: "found", value });
  const refused = async (): Promise<Fetched<string>> => ({ kind: "refused" });

  it("concurrent requests for one key share one load; a found key is kept", async () => {
    const cache = new KeyCache<string>();
    let loads = 0;
    const load = async (): Promise<Fetched<string>> => {
      loads += 1;
      await new Promise((resolve) => setTimeout(resolve, 20));
      return { kind: "found", value: "key" };
    };
    const outcomes = await Promise.all(Array.from({ length: 5 }, () => cache.get("kid", "source", load)));
    expect(outcomes.every((outcome) => outcome.kind === "found")).toBe(true);
    await cache.get("kid", "source", load);
    expect(loads).toBe(1);
  });

  it("never keeps a failure, and a load that throws is unavailable", async () => {
    const cache = new KeyCache<string>();
    const answers: Fetched<string>[] = [{ kind: "unavailable" }, { kind: "found", value: "late" }];
    const seen = [];
    for (let i = 0; i < 2; i++) seen.push((await cache.get("kid", "source", async () => answers[i]!)).kind);
    expect(seen).toEqual(["unavailable", "found"]);
    expect((await cache.get("other", "source", async () => Promise.reject(new Error("boom")))).kind).toBe(
      "unavailable",
    );
  });

  it(`remembers a refusal for ${REFUSAL_TTL_MS / 60_000} minutes, then asks again`, async () => {
    let now = 1_000_000;
    const cache = new KeyCache<string>(() => now);
    let loads = 0;
    const load = async (): Promise<Fetched<string>> => {
      loads += 1;
      return loads === 1 ? { kind: "refused" } : { kind: "found", value: "published late" };
    };
    expect((await cache.get("kid", "source", load)).kind).toBe("refused");
    now += REFUSAL_TTL_MS - 1;
    expect((await cache.get("kid", "source", load)).kind).toBe("refused");
    expect(loads).toBe(1);
    now += 1;
    expect(await cache.get("kid", "source", load)).toEqual({ kind: "found", value: "published late" });
    expect(loads).toBe(2);
  });

  it(`runs at most ${MAX_FETCHES_IN_FLIGHT} loads at once per scope: the next one is unavailable (busy) without loading; other scopes go on`, async () => {
    const cache = new KeyCache<string>();
    const release: (() => void)[] = [];
    const held = () => new Promise<Fetched<string>>((resolve) => release.push(() => resolve({ kind: "refused" })));
    const waiting = Array.from({ length: MAX_FETCHES_IN_FLIGHT }, (_, i) => cache.get(`held-${i}`, "flooded", held));
    let extraLoads = 0;
    const extra = async (): Promise<Fetched<string>> => {
      extraLoads += 1;
      return { kind: "found", value: "key" };
    };
    expect(await cache.get("one-more", "flooded", extra)).toEqual({ kind: "unavailable", busy: true });
    expect(extraLoads).toBe(0);
    // A request for a key already loading shares that load rather than counting again.
    const sharing = cache.get("held-0", "flooded", extra);
    expect((await cache.get("elsewhere", "quiet", extra)).kind).toBe("found");
    for (const done of release) done();
    await Promise.all([...waiting, sharing]);
    expect((await cache.get("one-more", "flooded", extra)).kind).toBe("found");
    expect(extraLoads).toBe(2);
  });

  it(`starts at most ${MAX_LOADS_PER_WINDOW} loads per scope per window, whatever the names: past that unavailable without loading, cached keys still found, the next window loads again`, async () => {
    let now = 5_000_000;
    const cache = new KeyCache<string>(() => now);
    await cache.get("genuine", "flooded", found("genuine key"));
    cache.proved("genuine", "genuine key");
    let loads = 0;
    const forgedLoad = async (): Promise<Fetched<string>> => {
      loads += 1;
      return { kind: "refused" };
    };
    const outcomes = [];
    for (let i = 0; i < MAX_UNPROVEN_ENTRIES * 2; i++)
      outcomes.push(await cache.get(`forged-${i}`, "flooded", forgedLoad));
    expect(loads).toBe(MAX_LOADS_PER_WINDOW - 1);
    expect(outcomes.slice(MAX_LOADS_PER_WINDOW)).toEqual(
      Array(MAX_UNPROVEN_ENTRIES * 2 - MAX_LOADS_PER_WINDOW).fill({ kind: "unavailable", busy: true }),
    );
    expect(await cache.get("genuine", "flooded", forgedLoad)).toEqual({ kind: "found", value: "genuine key" });
    expect((await cache.get("elsewhere", "quiet", found("key"))).kind).toBe("found");
    now += LOAD_WINDOW_MS;
    expect(await cache.get("published-late", "flooded", found("late key"))).toEqual({
      kind: "found",
      value: "late key",
    });
  });

  it("a key that verified a delivery is never evicted by keys or refusals that have not; an unproven key is", async () => {
    // The flood spread over many windows, so the per-window load cap lets every name be loaded and kept.
    let now = 0;
    const cache = new KeyCache<string>(() => now);
    await cache.get("genuine", "source", found("genuine key"));
    cache.proved("genuine", "genuine key");
    await cache.get("fetched-unproven", "source", found("someone's key"));
    for (let i = 0; i < MAX_UNPROVEN_ENTRIES + 36; i++) {
      now += LOAD_WINDOW_MS;
      await cache.get(`forged-${i}`, "source", i % 2 === 0 ? refused : found(`published-${i}`));
    }
    let reloads = 0;
    const reload = async (): Promise<Fetched<string>> => {
      reloads += 1;
      return { kind: "found", value: "reloaded" };
    };
    expect(await cache.get("genuine", "source", reload)).toEqual({ kind: "found", value: "genuine key" });
    expect(reloads).toBe(0);
    expect(await cache.get("fetched-unproven", "source", reload)).toEqual({ kind: "found", value: "reloaded" });
  });
});

describe("fetchPinned: what the key host's answer means", () => {
  beforeAll(() => redirectKeyFetchesForTests(env, keyStandinOrigin()));
  afterAll(() => redirectKeyFetchesForTests(env, null));
  const read = async (response: Response): Promise<Fetched<string>> => ({
    kind: "found",
    value: await response.text(),
  });
  const at = (path: string) =>
    fetchPinned(new URL(`https://sns.us-east-1.amazonaws.com${path}`), { method: "GET" }, read);

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
