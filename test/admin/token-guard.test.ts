import { env, exports } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import devVarsExample from "../../.dev.vars.example?raw";
import { SHIPPED_EXAMPLE_VALUES } from "../../src/admin/guards/auth";
import { LOGIN_FAILURES_PER_WINDOW } from "../../src/admin/guards/login-throttle";
import { tokenEntropyBits, tokenStrength } from "../../src/admin/guards/token-strength";
import { app } from "../../src/app";

/**
 * Two guards on the admin token. A value the repository ships as an example opens nothing outside local
 * development (503 saying so, and /health names the reason), nor does a guessable one (503 admin_token_weak). And
 * guessing is braked: after LOGIN_FAILURES_PER_WINDOW wrong tokens a minute from one address, through the sign-in
 * form or as a bearer token, that address's wrong tokens get 429 with Retry-After; the right token never does.
 */

const ORIGIN = "https://receiver.test";

/** What `npm run -s cli -- secret token` prints: 32 random bytes in hex. */
const randomToken = () =>
  [...crypto.getRandomValues(new Uint8Array(32))].map((byte) => byte.toString(16).padStart(2, "0")).join("");

/** Every value .dev.vars.example assigns: the file anyone reads first. */
const exampleValues = [...devVarsExample.matchAll(/^[A-Z_]+="([^"]*)"$/gm)].map((match) => match[1]!);

const withToken = (token: string, extra: Record<string, string> = {}) =>
  ({ ...env, ADMIN_TOKEN: token, LOCAL_DEVELOPMENT: undefined, ...extra }) as unknown as Env;

const apiCall = (token: string, testEnv: Env) =>
  app.fetch(
    new Request(`${ORIGIN}/admin/api/receipts?limit=1`, { headers: { authorization: `Bearer ${token}` } }),
    testEnv,
  );

/** An API call through the real Worker, with this bearer token (none for null) from this client. */
function adminCall(token: string | null, headers: Record<string, string>): Promise<Response> {
  const authorization: Record<string, string> = token === null ? {} : { authorization: `Bearer ${token}` };
  return exports.default.fetch(
    new Request(`${ORIGIN}/admin/api/receipts?limit=1`, { headers: { ...authorization, ...headers } }),
  );
}

function login(token: string, headers: Record<string, string> = {}, testEnv?: Env): Promise<Response> {
  const request = new Request(`${ORIGIN}/admin/login`, {
    method: "POST",
    body: new URLSearchParams({ token }),
    headers: { "content-type": "application/x-www-form-urlencoded", origin: ORIGIN, ...headers },
    redirect: "manual",
  });
  return testEnv ? Promise.resolve(app.fetch(request, testEnv)) : exports.default.fetch(request);
}

afterEach(() => {
  vi.useRealTimers();
});

describe("a shipped example admin token", () => {
  it("lists every value .dev.vars.example and the README ship (the README's local token among them)", () => {
    expect(exampleValues.filter((value) => value !== "true").length).toBeGreaterThanOrEqual(3);
    for (const value of exampleValues.filter((value) => value !== "true"))
      expect(SHIPPED_EXAMPLE_VALUES).toContain(value);
    expect(SHIPPED_EXAMPLE_VALUES).toContain("local-admin-token-change-me");
  });

  it("shuts the admin API and the sign-in form with a 503 saying why, and /health names the reason, when not local", async () => {
    for (const example of SHIPPED_EXAMPLE_VALUES) {
      const deployed = withToken(example);
      const api = await apiCall(example, deployed);
      expect(api.status).toBe(503);
      expect(await api.json()).toEqual({
        error: { code: "admin_token_is_example", message: expect.stringContaining("shipped example") },
      });

      const form = await login(example, {}, deployed);
      expect(form.status).toBe(503);
      expect(form.headers.get("set-cookie")).toBeNull();
      expect(await form.text()).toContain("shipped example");

      const health = await app.fetch(new Request(`${ORIGIN}/health`), deployed);
      const answer = (await health.json()) as { status: string; reasons: string[]; detail: string };
      expect(answer).toMatchObject({
        status: "degraded",
        detail: expect.stringContaining("ADMIN_TOKEN is the shipped example"),
      });
      expect(answer.reasons).toContain("admin-token-example");
    }
  });

  it('still works where .dev.vars says LOCAL_DEVELOPMENT="true" (wrangler dev), and a real token works anywhere', async () => {
    const local = withToken("local-admin-token-change-me", { LOCAL_DEVELOPMENT: "true" });
    expect((await apiCall("local-admin-token-change-me", local)).status).toBe(200);
    const health = (await (await app.fetch(new Request(`${ORIGIN}/health`), local)).json()) as { reasons?: string[] };
    expect(health.reasons ?? []).not.toContain("admin-token-example");
    // Only the exact value "true" marks local development.
    expect(
      (
        await apiCall(
          "local-admin-token-change-me",
          withToken("local-admin-token-change-me", { LOCAL_DEVELOPMENT: "yes" }),
        )
      ).status,
    ).toBe(503);
    const real = "a-real-admin-token-0123456789abcdef";
    expect((await apiCall(real, withToken(real))).status).toBe(200);
  });
});

describe("the whole admin token, and nothing less", () => {
  it("opens neither the API nor the sign-in form for a prefix of it: one character, all but the last, or nothing", async () => {
    const real = "a-real-admin-token-0123456789abcdef";
    const deployed = withToken(real);
    const address = { "cf-connecting-ip": "203.0.113.41" };
    for (const prefix of [real.slice(0, 1), real.slice(0, -1)]) {
      const api = await apiCall(prefix, deployed);
      expect(api.status, `bearer ${prefix}`).toBe(401);
      expect(api.headers.get("www-authenticate")).toBe('Bearer realm="admin"');
    }
    for (const prefix of ["", real.slice(0, 1), real.slice(0, -1)]) {
      const form = await login(prefix, address, deployed);
      expect(form.status, `form ${JSON.stringify(prefix)}`).toBe(401);
      expect(form.headers.get("set-cookie")).toBeNull();
    }
    // The whole token opens both under the same env: the refusals above are the prefixes', not the setup's.
    expect((await apiCall(real, deployed)).status).toBe(200);
    expect((await login(real, address, deployed)).status).toBe(303);
  });

  it("takes the bearer scheme name in any case, as HTTP auth schemes are (RFC 9110 §11.1)", async () => {
    const real = "a-real-admin-token-0123456789abcdef";
    for (const scheme of ["bearer", "BEARER"]) {
      const response = await app.fetch(
        new Request(`${ORIGIN}/admin/api/receipts?limit=1`, { headers: { authorization: `${scheme} ${real}` } }),
        withToken(real),
      );
      expect(response.status, scheme).toBe(200);
    }
  });
});

describe("the sign-in throttle", () => {
  it("answers a wrong token 429 with Retry-After after too many failures from one address; other addresses are unaffected", async () => {
    const address = { "cf-connecting-ip": "203.0.113.7" };
    for (let attempt = 0; attempt < LOGIN_FAILURES_PER_WINDOW; attempt += 1) {
      expect((await login(`wrong-${attempt}`, address)).status).toBe(401);
    }
    const throttled = await login("wrong-again", address);
    expect(throttled.status).toBe(429);
    const retryAfter = Number(throttled.headers.get("retry-after"));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(throttled.headers.get("set-cookie")).toBeNull();
    expect(await throttled.text()).toContain("Too many failed sign-ins");
    expect((await login(env.ADMIN_TOKEN, { "cf-connecting-ip": "203.0.113.8" })).status).toBe(303);
  });

  it("never refuses the right token: whoever shares the operator's address cannot lock them out", async () => {
    const shared = { "cf-connecting-ip": "203.0.113.9" };
    for (let attempt = 0; attempt <= LOGIN_FAILURES_PER_WINDOW; attempt += 1) await login(`guess-${attempt}`, shared);
    expect((await login("one-more-guess", shared)).status).toBe(429);
    const operator = await login(env.ADMIN_TOKEN, shared);
    expect(operator.status).toBe(303);
    expect(operator.headers.get("set-cookie")).toMatch(/^admin_session=/);
    const api = await adminCall(env.ADMIN_TOKEN, shared);
    expect(api.status).toBe(200);
  });

  it("counts wrong bearer tokens on the API too: 429 with Retry-After past the limit, the right one still 200", async () => {
    const address = { "cf-connecting-ip": "203.0.113.10" };
    for (let attempt = 0; attempt < LOGIN_FAILURES_PER_WINDOW; attempt += 1)
      expect((await adminCall(`wrong-bearer-${attempt}`, address)).status).toBe(401);
    const throttled = await adminCall("wrong-bearer-again", address);
    expect(throttled.status).toBe(429);
    expect(Number(throttled.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(await throttled.json()).toEqual({
      error: { code: "too_many_failed_attempts", message: expect.stringContaining("Too many wrong admin tokens") },
    });
    // One count per address, whichever door the guesses came through.
    expect((await login("wrong-form", address)).status).toBe(429);
    expect((await adminCall(env.ADMIN_TOKEN, address)).status).toBe(200);
    // A request with no token at all is no guess: it neither counts nor is throttled.
    expect((await adminCall(null, { "cf-connecting-ip": "203.0.113.11" })).status).toBe(401);
  });

  it("lets the address try again once the minute is over, and a success clears its failures", async () => {
    const address = { "cf-connecting-ip": "198.51.100.23" };
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.parse("2026-12-01T10:00:00Z"));
    for (let attempt = 0; attempt < LOGIN_FAILURES_PER_WINDOW; attempt += 1) await login("wrong", address);
    expect((await login("wrong", address)).status).toBe(429);
    vi.setSystemTime(Date.parse("2026-12-01T10:01:00Z"));
    expect((await login("wrong", address)).status).toBe(401);
    expect((await login(env.ADMIN_TOKEN, address)).status).toBe(303);
    // The success forgot the earlier failures: a fresh budget, not one failure short of the brake.
    for (let attempt = 0; attempt < LOGIN_FAILURES_PER_WINDOW - 1; attempt += 1)
      expect((await login("wrong", address)).status).toBe(401);
    expect((await login(env.ADMIN_TOKEN, address)).status).toBe(303);
  });
});

describe("a guessable admin token", () => {
  it("shuts the API and the sign-in form with a 503 saying why, for one repeated character or a short repeating pattern", async () => {
    for (const weak of ["a".repeat(40), "abcdabcdabcdabcd", "abababababababababababababababab"]) {
      for (const extra of [{}, { LOCAL_DEVELOPMENT: "true" }] as Record<string, string>[]) {
        const configured = withToken(weak, extra);
        const api = await apiCall(weak, configured);
        expect(api.status, weak).toBe(503);
        expect(await api.json()).toEqual({
          error: { code: "admin_token_weak", message: expect.stringContaining("npm run -s cli -- secret token") },
        });
        const form = await login(weak, {}, configured);
        expect(form.status).toBe(503);
        expect(form.headers.get("set-cookie")).toBeNull();
        expect(await form.text()).toContain("too few characters");
      }
    }
  });

  it("takes a token of as many characters as the CLI makes, and the tests' own", () => {
    expect(tokenStrength(randomToken())).toBe("strong");
    expect(tokenStrength(env.ADMIN_TOKEN)).toBe("strong");
    expect(tokenStrength("a-real-admin-token-0123456789abcdef")).toBe("strong");
    expect(tokenEntropyBits("a".repeat(64))).toBe(0);
    expect(tokenStrength("abcdabcdabcdabcd")).toBe("low-entropy");
    expect(tokenStrength("short")).toBe("too-short");
  });
});
