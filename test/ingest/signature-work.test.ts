import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { adapterFor } from "../../src/providers/registry";
import { MAX_SIGNATURE_ENTRIES, MAX_VERIFICATION_STEPS } from "../../src/providers/signed";
import { post, signDemo } from "../support/deliveries";
import { expectUnchanged, settle, settleEachTest, snapshot } from "../support/storage";

/**
 * Signature checking is work an unauthenticated caller can ask for. Each expected MAC is computed once per
 * (secret, signed content) and every presented signature compared against it, and the total per request is
 * bounded. Counted, not timed: every HMAC the receiver computes or verifies goes through crypto.subtle, spied on.
 */

function countHmacs() {
  const calls = { count: 0 };
  const count = (algorithm: unknown) => {
    const name = typeof algorithm === "string" ? algorithm : (algorithm as { name?: string }).name;
    if (name?.toUpperCase() === "HMAC") calls.count += 1;
  };
  const sign = crypto.subtle.sign.bind(crypto.subtle);
  const verify = crypto.subtle.verify.bind(crypto.subtle);
  vi.spyOn(crypto.subtle, "sign").mockImplementation(
    (algorithm, key, data) => (count(algorithm), sign(algorithm, key, data)),
  );
  vi.spyOn(crypto.subtle, "verify").mockImplementation(
    (algorithm, key, signature, data) => (count(algorithm), verify(algorithm, key, signature, data)),
  );
  return calls;
}

/** n well-formed `v1,<base64>` entries that are not the signature. */
function forgedEntries(n: number): string[] {
  return Array.from(
    { length: n },
    () => `v1,${btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(32))))}`,
  );
}

afterEach(() => {
  vi.restoreAllMocks();
});

settleEachTest();

describe("HMAC work per request", () => {
  it("16 forged signatures cost one MAC per secret, not one per signature", async () => {
    await settle();
    const before = await snapshot();
    const body = JSON.stringify({
      type: "account.credited",
      data: { account: "acct_forged", amount: 1 },
      padding: "x".repeat(100_000),
    });
    const headers = signDemo("msg_forged_many", body);
    const hmacs = countHmacs();
    const response = await post("/webhooks/demo", body, {
      ...headers,
      "webhook-signature": forgedEntries(MAX_SIGNATURE_ENTRIES).join(" "),
    });
    expect(response.status).toBe(401);
    expect(hmacs.count).toBe(1);

    // Two usable secrets during a rotation: two MACs.
    hmacs.count = 0;
    const rotating = await post("/webhooks/rotating", body, {
      ...headers,
      "webhook-signature": forgedEntries(MAX_SIGNATURE_ENTRIES).join(" "),
    });
    expect(rotating.status).toBe(401);
    expect(hmacs.count).toBe(2);
    vi.restoreAllMocks();
    await expectUnchanged(before);
  });

  it("the real signature among forged ones verifies, still with one MAC", async () => {
    const body = JSON.stringify({ type: "account.credited", data: { account: "acct_forged_mix", amount: 1 } });
    const headers = signDemo(`msg_forged_mix_${crypto.randomUUID()}`, body);
    const hmacs = countHmacs();
    const mixed = [...forgedEntries(MAX_SIGNATURE_ENTRIES - 1), headers["webhook-signature"]].join(" ");
    const response = await post("/webhooks/demo", body, { ...headers, "webhook-signature": mixed });
    expect(response.status).toBe(200);
    expect(hmacs.count).toBe(1);
  });

  it("refuses, computing nothing, a request whose secrets × signed contents exceed the bound", async () => {
    const adapter = adapterFor("standard-webhooks")!;
    const body = JSON.stringify({ type: "account.credited", data: { account: "acct_over_budget", amount: 1 } });
    const headers = new Headers(signDemo("msg_over_budget", body));
    const secrets = Array.from({ length: MAX_VERIFICATION_STEPS + 1 }, (_, index) => ({
      name: `S${index}`,
      value: env.DEMO_WEBHOOK_SECRET,
    }));
    const input = {
      rawBody: new TextEncoder().encode(body),
      headers,
      url: "https://receiver.test/webhooks/x",
      now: Date.now(),
      options: {},
    };

    const hmacs = countHmacs();
    expect(await adapter.verify({ ...input, secrets })).toEqual({
      kind: "rejected",
      reason: "verification-over-budget",
    });
    expect(hmacs.count).toBe(0);
    // At the bound it still verifies (the first secret matches: one MAC).
    expect((await adapter.verify({ ...input, secrets: secrets.slice(0, MAX_VERIFICATION_STEPS) })).kind).toBe("event");
    expect(hmacs.count).toBe(1);
  });
});
