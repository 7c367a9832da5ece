import { env, exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { issueSession, SESSION_TTL_MS, sessionIsValid } from "../../src/admin/guards/auth";
import { ADMIN_MAX_BODY_BYTES } from "../../src/admin/guards/body-cap";
import { LOGIN_FAILURES_PER_WINDOW, LOGIN_WINDOW_MS, refuseWrongToken } from "../../src/admin/guards/login-throttle";
import { isCrossSiteRequest } from "../../src/admin/guards/same-origin";
import { MIN_ADMIN_TOKEN_LENGTH, tokenEntropyBits, tokenStrength } from "../../src/admin/guards/token-strength";
import { app } from "../../src/app";
import { ADMIN } from "./support";

/**
 * The admin guards at their exact edges (src/admin/guards/): the shortest and least varied token that is still
 * strong, the last wrong token before the brake and the moment its minute ends, a session at the instant it
 * expires, the body cap to the byte, and each way a browser says a request is another site's.
 */

const ORIGIN = "https://receiver.test";
const start = Date.parse("2026-12-01T10:00:00Z");
let clientCount = 0;
const newClient = () => `203.0.113.${++clientCount}-${crypto.randomUUID()}`;

describe("the admin token's strength, at its edges", () => {
  it("takes a token of exactly the minimum length, and refuses one character less", () => {
    const token = "0123456789abcdefghijklmnopqrstuv".slice(0, MIN_ADMIN_TOKEN_LENGTH);
    expect(tokenStrength(token)).toBe("strong");
    expect(tokenStrength(token.slice(1))).toBe("too-short");
  });

  it("takes a token of exactly 40 bits of entropy, and refuses one with less", () => {
    // Four characters five times each: 2 bits per character, 20 characters, 40 bits exactly.
    const atTheLimit = "aaaaabbbbbcccccddddd";
    expect(tokenEntropyBits(atTheLimit)).toBe(40);
    expect(tokenStrength(atTheLimit)).toBe("strong");
    expect(tokenStrength("aaaaabbbbbcccccdddd")).toBe("low-entropy");
  });
});

describe("the wrong-token brake, at its edges", () => {
  it("answers the first LOGIN_FAILURES_PER_WINDOW wrong tokens as ordinary failures, and brakes the next", () => {
    const client = newClient();
    for (let failure = 0; failure < LOGIN_FAILURES_PER_WINDOW; failure++)
      expect(refuseWrongToken(client, start + failure)).toBeNull();
    expect(refuseWrongToken(client, start + LOGIN_FAILURES_PER_WINDOW)).toBe(LOGIN_WINDOW_MS / 1000);
  });

  it("says how much of the minute is left, and lets the client try again the moment it is over", () => {
    const client = newClient();
    for (let failure = 0; failure < LOGIN_FAILURES_PER_WINDOW; failure++) refuseWrongToken(client, start);
    expect(refuseWrongToken(client, start + 45_000)).toBe(15);
    expect(refuseWrongToken(client, start + LOGIN_WINDOW_MS - 1)).toBe(1);
    expect(refuseWrongToken(client, start + LOGIN_WINDOW_MS)).toBeNull();
  });

  it("forgets the oldest client first once it tracks 10 000, so a flood of addresses cannot grow it without bound", () => {
    const braked = newClient();
    for (let failure = 0; failure < LOGIN_FAILURES_PER_WINDOW; failure++) refuseWrongToken(braked, start);
    expect(refuseWrongToken(braked, start)).not.toBeNull();
    // Ten thousand other addresses, one wrong token each, inside the same minute: the braked one is the oldest.
    for (let other = 0; other < 10_000; other++) refuseWrongToken(`flood-${other}-${braked}`, start);
    expect(refuseWrongToken(braked, start)).toBeNull();
  });
});

describe("what the brake counts", () => {
  it("counts only a token presented and refused: requests with none never brake the address", async () => {
    const address = { "cf-connecting-ip": newClient() };
    for (let request = 0; request <= LOGIN_FAILURES_PER_WINDOW; request++) {
      const bare = await exports.default.fetch(
        new Request(`${ORIGIN}/admin/api/receipts?limit=1`, { headers: address }),
      );
      expect(bare.status).toBe(401);
    }
    const wrong = await exports.default.fetch(
      new Request(`${ORIGIN}/admin/api/receipts?limit=1`, {
        headers: { ...address, authorization: "Bearer a-wrong-token-that-is-long-enough" },
      }),
    );
    expect(wrong.status).toBe(401);
  });
});

describe("an admin session, at its edges", () => {
  it("is valid until the millisecond before it expires, and not at that millisecond", async () => {
    const cookie = await issueSession(env.ADMIN_TOKEN, start);
    expect(await sessionIsValid(env, cookie, start + SESSION_TTL_MS - 1)).toBe(true);
    expect(await sessionIsValid(env, cookie, start + SESSION_TTL_MS)).toBe(false);
    expect(await sessionIsValid(env, cookie, start + SESSION_TTL_MS + 3_600_000)).toBe(false);
  });
});

describe("another site's request, told apart", () => {
  const url = `${ORIGIN}/admin/api/dead/dismiss`;
  const headers = (values: Record<string, string>) => new Headers(values);

  it("refuses every changing method, DELETE included, and never a read", () => {
    for (const method of ["POST", "PUT", "PATCH", "DELETE", "delete"])
      expect(isCrossSiteRequest(method, headers({ "sec-fetch-site": "cross-site" }), url)).toBe(true);
    expect(isCrossSiteRequest("GET", headers({ "sec-fetch-site": "cross-site" }), url)).toBe(false);
  });

  it("reads Origin when the browser sends no Sec-Fetch-Site: another origin is refused, its own is not", () => {
    expect(isCrossSiteRequest("POST", headers({ origin: "https://evil.example" }), url)).toBe(true);
    expect(isCrossSiteRequest("POST", headers({ origin: "https://receiver.test.evil.example" }), url)).toBe(true);
    expect(isCrossSiteRequest("POST", headers({ origin: ORIGIN }), url)).toBe(false);
    expect(isCrossSiteRequest("POST", headers({}), url)).toBe(false);
  });

  it("reads Sec-Fetch-Site's value in any case", () => {
    expect(isCrossSiteRequest("POST", headers({ "sec-fetch-site": "Same-Origin" }), url)).toBe(false);
    expect(isCrossSiteRequest("POST", headers({ "sec-fetch-site": "NONE" }), url)).toBe(false);
    expect(isCrossSiteRequest("POST", headers({ "sec-fetch-site": "Same-Site" }), url)).toBe(true);
  });
});

describe("the admin body cap, to the byte", () => {
  const post = (body: BodyInit, extra: Record<string, string> = {}) =>
    exports.default.fetch(
      new Request(`${ORIGIN}/admin/api/dead/dismiss`, {
        method: "POST",
        body,
        headers: { ...ADMIN, "content-type": "application/json", ...extra },
      }),
    );
  /** A JSON body of exactly `bytes` bytes that the dismiss action reads as naming no receipt. */
  const jsonOf = (bytes: number) => {
    const frame = '{"receiptIds":[],"pad":""}';
    return `${frame.slice(0, -2)}${"a".repeat(bytes - frame.length)}"}`;
  };

  it("takes a body of exactly the cap, and refuses one byte more with 413", async () => {
    expect(jsonOf(ADMIN_MAX_BODY_BYTES)).toHaveLength(ADMIN_MAX_BODY_BYTES);
    const atTheCap = await post(jsonOf(ADMIN_MAX_BODY_BYTES));
    expect(atTheCap.status).not.toBe(413);
    const overIt = await post(jsonOf(ADMIN_MAX_BODY_BYTES + 1));
    expect(overIt.status).toBe(413);
  });

  it("answers a body whose stream breaks part-way 400 body_unreadable, and does nothing with it", async () => {
    let sent = false;
    const broken = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent) return controller.error(new Error("connection reset"));
        sent = true;
        controller.enqueue(new TextEncoder().encode('{"receiptIds":['));
      },
    });
    // app.fetch, not exports: a stream that errors crossing into the Worker arrives cut short, not broken.
    const response = await app.fetch(
      new Request(`${ORIGIN}/admin/api/dead/dismiss`, {
        method: "POST",
        body: broken,
        headers: { ...ADMIN, "content-type": "application/json" },
      }),
      env,
    );
    expect(response.status).toBe(400);
    expect(await response.json()).toMatchObject({ error: { code: "body_unreadable" } });
  });
});
