import { env, exports } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import devVarsExample from "../../.dev.vars.example?raw";
import { SHIPPED_EXAMPLE_VALUES } from "../../src/admin/guards/auth";
import { LOGIN_FAILURES_PER_WINDOW } from "../../src/admin/guards/login-throttle";
import { app } from "../../src/app";

/**
 * Two guards on the admin token. A value the repository ships as an example opens nothing outside local
 * development (503 saying so, and /health names the reason). And the sign-in form slows guessing: after
 * LOGIN_FAILURES_PER_WINDOW failures a minute from one address, that address gets 429 with Retry-After.
 */

const ORIGIN = "https://receiver.test";

/** Every value .dev.vars.example assigns: the file anyone reads first. */
const exampleValues = [...devVarsExample.matchAll(/^[A-Z_]+="([^"]*)"$/gm)].map((match) => match[1]!);

const withToken = (token: string, extra: Record<string, string> = {}) =>
  ({ ...env, ADMIN_TOKEN: token, LOCAL_DEVELOPMENT: undefined, ...extra }) as unknown as Env;

const apiCall = (token: string, testEnv: Env) =>
  app.fetch(
    new Request(`${ORIGIN}/admin/api/receipts?limit=1`, { headers: { authorization: `Bearer ${token}` } }),
    testEnv,
  );

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
  it("answers 429 with Retry-After after too many failures from one address, right token or not; other addresses are unaffected", async () => {
    const address = { "cf-connecting-ip": "203.0.113.7" };
    for (let attempt = 0; attempt < LOGIN_FAILURES_PER_WINDOW; attempt += 1) {
      expect((await login(`wrong-${attempt}`, address)).status).toBe(401);
    }
    for (const token of ["wrong-again", env.ADMIN_TOKEN]) {
      const throttled = await login(token, address);
      expect(throttled.status).toBe(429);
      const retryAfter = Number(throttled.headers.get("retry-after"));
      expect(retryAfter).toBeGreaterThanOrEqual(1);
      expect(retryAfter).toBeLessThanOrEqual(60);
      expect(throttled.headers.get("set-cookie")).toBeNull();
      expect(await throttled.text()).toContain("Too many failed sign-ins");
    }
    expect((await login(env.ADMIN_TOKEN, { "cf-connecting-ip": "203.0.113.8" })).status).toBe(303);
  });

  it("lets the address try again once the minute is over, and a success clears its failures", async () => {
    const address = { "cf-connecting-ip": "198.51.100.23" };
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.parse("2026-12-01T10:00:00Z"));
    for (let attempt = 0; attempt < LOGIN_FAILURES_PER_WINDOW; attempt += 1) await login("wrong", address);
    expect((await login(env.ADMIN_TOKEN, address)).status).toBe(429);
    vi.setSystemTime(Date.parse("2026-12-01T10:01:00Z"));
    expect((await login(env.ADMIN_TOKEN, address)).status).toBe(303);
    // The success forgot the earlier failures: a fresh budget, not one failure short of the brake.
    for (let attempt = 0; attempt < LOGIN_FAILURES_PER_WINDOW - 1; attempt += 1)
      expect((await login("wrong", address)).status).toBe(401);
    expect((await login(env.ADMIN_TOKEN, address)).status).toBe(303);
  });
});
