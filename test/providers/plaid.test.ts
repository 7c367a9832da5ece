import { env } from "cloudflare:workers";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { MAX_FETCHES_IN_FLIGHT, MAX_LOADS_PER_WINDOW, MAX_UNPROVEN_ENTRIES } from "../../src/providers/key-cache";
import { redirectKeyFetchesForTests } from "../../src/providers/key-fetch";
import {
  claimAnswer,
  expectAccepted,
  expectRejectedAndNothingWritten,
  send,
  storedCounts,
  storedReceipt,
  uniqueKey,
} from "./support/contract";
import { keyStandinOrigin } from "./support/key-standin";
import { sha256Hex } from "./support/signers";

/**
 * Plaid through the real route: the JWT is signed with `jose` (ES256), and its key is served by the key stand-in
 * (test/setup/global/key-standin.ts) as Plaid's /webhook_verification_key/get would return it.
 */

const SOURCE = "pv-plaid";
const standin = keyStandinOrigin;
const plaidSecret = () => (env as unknown as Record<string, string>).PV_PLAID_SECRET!;
const KEY_ENDPOINT = "/webhook_verification_key/get";

interface SigningKey {
  kid: string;
  privateKey: CryptoKey;
}

async function publish(kid: string, published: object): Promise<void> {
  const response = await fetch(`${standin()}/__plaid/${kid}`, { method: "PUT", body: JSON.stringify(published) });
  expect(response.status).toBe(204);
}

/** A key published under a fresh id (Plaid's ids are UUIDs). */
async function publishedKey(options: { expired?: boolean } = {}): Promise<SigningKey> {
  const { publicKey, privateKey } = await generateKeyPair("ES256", { extractable: true });
  const kid = crypto.randomUUID();
  const key = {
    ...(await exportJWK(publicKey)),
    kid,
    alg: "ES256",
    use: "sig",
    created_at: 1_700_000_000,
    expired_at: options.expired ? 1_700_000_100 : null,
  };
  await publish(kid, { secret: plaidSecret(), key });
  return { kid, privateKey };
}

async function keyFetches(): Promise<number> {
  return Number(await (await fetch(`${standin()}/__fetches?path=${encodeURIComponent(KEY_ENDPOINT)}`)).text());
}

/** Key requests that asked for this id, whichever secret asked. */
async function fetchesOfKid(kid: string): Promise<number> {
  return Number(await (await fetch(`${standin()}/__fetches?kid=${encodeURIComponent(kid)}`)).text());
}

function webhookBody(): string {
  return JSON.stringify({
    webhook_type: "TRANSACTIONS",
    webhook_code: "SYNC_UPDATES_AVAILABLE",
    item_id: "item-42",
    marker: uniqueKey("plaid"),
  });
}

async function signed(body: string, key: SigningKey, options: { iat?: number; bodyHash?: string; alg?: "ES256" } = {}) {
  const jwt = await new SignJWT({ request_body_sha256: options.bodyHash ?? sha256Hex(body) })
    .setProtectedHeader({ alg: "ES256", kid: key.kid, typ: "JWT" })
    .setIssuedAt(options.iat ?? Math.floor(Date.now() / 1000))
    .sign(key.privateKey);
  return { body, headers: { "content-type": "application/json", "plaid-verification": jwt } };
}

let current: SigningKey;
beforeAll(async () => {
  redirectKeyFetchesForTests(env, standin());
  current = await publishedKey();
});
afterAll(() => redirectKeyFetchesForTests(env, null));
afterEach(() => {
  vi.useRealTimers();
});

describe("plaid: ES256 JWT with a key fetched by key id", () => {
  it("accepts a delivery, keyed by the payload's SHA-256; a retry of the same bytes is a duplicate", async () => {
    const request = await signed(webhookBody(), current);
    const receiptId = await expectAccepted(SOURCE, request);
    expect(await storedReceipt(SOURCE, receiptId)).toMatchObject({
      eventKey: sha256Hex(request.body),
      eventType: "TRANSACTIONS.SYNC_UPDATES_AVAILABLE",
      subjectId: "item-42",
    });
    expect(await claimAnswer(await send(SOURCE, request))).toEqual({ status: "duplicate", receipt: receiptId });
  });

  it("fetches a key id once per isolate", async () => {
    const key = await publishedKey();
    const before = await keyFetches();
    for (let i = 0; i < 3; i++) await expectAccepted(SOURCE, await signed(webhookBody(), key));
    expect(await keyFetches()).toBe(before + 1);
  });

  it("refuses a body the JWT does not hash, a stale or future iat, an unknown or expired key, another key's signature, a missing header", async () => {
    const body = webhookBody();
    await expectRejectedAndNothingWritten(SOURCE, await signed(body, current, { bodyHash: sha256Hex(`${body} `) }));
    const request = await signed(body, current);
    await expectRejectedAndNothingWritten(SOURCE, { ...request, body: body.replace("item-42", "item-43") });
    await expectRejectedAndNothingWritten(
      SOURCE,
      await signed(body, current, { iat: Math.floor(Date.now() / 1000) - 6 * 60 }),
    );
    await expectRejectedAndNothingWritten(
      SOURCE,
      await signed(body, current, { iat: Math.floor(Date.now() / 1000) + 10 * 60 }),
    );
    const unpublished = { kid: crypto.randomUUID(), privateKey: current.privateKey };
    await expectRejectedAndNothingWritten(SOURCE, await signed(body, unpublished));
    await expectRejectedAndNothingWritten(SOURCE, await signed(body, await publishedKey({ expired: true })));
    const other = await publishedKey();
    await expectRejectedAndNothingWritten(
      SOURCE,
      await signed(body, { kid: current.kid, privateKey: other.privateKey }),
    );
    await expectRejectedAndNothingWritten(SOURCE, { body, headers: { "content-type": "application/json" } });
    await expectRejectedAndNothingWritten(SOURCE, { body, headers: { "plaid-verification": "not.a.jwt" } });
  });

  it("answers 503 while the key cannot be fetched, writing nothing", async () => {
    const down = { kid: crypto.randomUUID(), privateKey: current.privateKey };
    await publish(down.kid, { answer: "down" });
    const before = await storedCounts(SOURCE);
    const answer = await send(SOURCE, await signed(webhookBody(), down));
    expect(answer.status).toBe(503);
    expect(((await answer.json()) as { error: { code: string } }).error.code).toBe("verification_key_unavailable");
    expect(await storedCounts(SOURCE)).toEqual(before);
  });

  it("a secret Plaid refuses (INVALID_API_KEYS) is a deploy mistake: 503, never a 401 a sender takes as final", async () => {
    const before = await storedCounts("pv-plaid-wrong-secret");
    // A key id this isolate has not fetched yet (a key is public: once fetched, whichever source fetched it, it is kept).
    const answer = await send("pv-plaid-wrong-secret", await signed(webhookBody(), await publishedKey()));
    expect(answer.status).toBe(503);
    expect(await storedCounts("pv-plaid-wrong-secret")).toEqual(before);
  });
});

describe("plaid: a forged kid can neither multiply key requests nor evict the genuine key", () => {
  const forged = (kid: string) => ({ kid, privateKey: current.privateKey });

  it("a kid that is not a UUID is refused before anything is fetched", async () => {
    for (const kid of [
      "not-a-uuid",
      `${crypto.randomUUID()}x`,
      "../../webhook_verification_key/get",
      "0".repeat(128),
      "",
    ]) {
      await expectRejectedAndNothingWritten(SOURCE, await signed(webhookBody(), forged(kid)));
      expect(await fetchesOfKid(kid)).toBe(0);
    }
  });

  it("repeating one unknown kid costs one key request per listed secret, then none while the refusal is remembered", async () => {
    const once = forged(crypto.randomUUID());
    for (let i = 0; i < 10; i++) await expectRejectedAndNothingWritten(SOURCE, await signed(webhookBody(), once));
    expect(await fetchesOfKid(once.kid)).toBe(1);
    // Two secrets: the first one Plaid refuses as credentials, the second one learns the id is unknown.
    const rotating = forged(crypto.randomUUID());
    for (let i = 0; i < 10; i++)
      await expectRejectedAndNothingWritten("pv-plaid-rotating", await signed(webhookBody(), rotating));
    expect(await fetchesOfKid(rotating.kid)).toBe(2);
  });

  it("a rotated-out secret listed first is skipped: the next listed secret fetches the key", async () => {
    const key = await publishedKey();
    await expectAccepted("pv-plaid-rotating", await signed(webhookBody(), key));
    expect(await fetchesOfKid(key.kid)).toBe(2);
  });

  it(`after 100 forged kids (published keys that verify nothing, and unknown ids) at most ${MAX_LOADS_PER_WINDOW} key requests were made, and the genuine key verifies without a refetch`, async () => {
    // A source of its own: the flood spends its key-request allowance for the minute, and no other test's.
    const source = "pv-plaid-flood";
    // The clock pinned: the whole flood falls in one allowance window however slowly the machine runs it.
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now());
    const genuine = await publishedKey();
    await expectAccepted(source, await signed(webhookBody(), genuine));
    expect(await fetchesOfKid(genuine.kid)).toBe(1);
    const before = await storedCounts(source);
    const requestsBefore = await keyFetches();
    const answers = new Set<number>();
    for (let i = 0; i < 100; i++) {
      // More distinct names than the cache keeps refusals for: real key ids the attacker cannot sign for (fetched
      // and kept, but they never verify a delivery), and unknown ones.
      const kid = i % 2 === 0 ? (await publishedKey()).kid : crypto.randomUUID();
      const answer = await send(source, await signed(webhookBody(), forged(kid)));
      await answer.body?.cancel();
      answers.add(answer.status);
    }
    expect(100).toBeGreaterThan(MAX_UNPROVEN_ENTRIES);
    // Refused while the allowance lasts, then 503 without a request: the sender of a genuine new key retries.
    expect([...answers].sort()).toEqual([401, 503]);
    expect((await keyFetches()) - requestsBefore).toBeLessThanOrEqual(MAX_LOADS_PER_WINDOW);
    expect(await storedCounts(source)).toEqual(before);
    await expectAccepted(source, await signed(webhookBody(), genuine));
    expect(await fetchesOfKid(genuine.kid)).toBe(1);
  });

  it(`at most ${MAX_FETCHES_IN_FLIGHT} key requests wait at once per source; the rest are 503 without a fetch, and a known key still verifies`, async () => {
    const hanging = Array.from({ length: MAX_FETCHES_IN_FLIGHT + 3 }, () => forged(crypto.randomUUID()));
    for (const key of hanging) await publish(key.kid, { answer: "hang" });
    const before = await storedCounts(SOURCE);
    const flood = Promise.all(hanging.map(async (key) => send(SOURCE, await signed(webhookBody(), key))));
    // While the flood waits on Plaid, a delivery signed with a key this isolate already holds needs no fetch.
    await expectAccepted(SOURCE, await signed(webhookBody(), current));
    const answers = await flood;
    expect(answers.map((answer) => answer.status)).toEqual(hanging.map(() => 503));
    const fetched = await Promise.all(hanging.map((key) => fetchesOfKid(key.kid)));
    expect(fetched.reduce((sum, count) => sum + count, 0)).toBe(MAX_FETCHES_IN_FLIGHT);
    expect((await storedCounts(SOURCE)).receipts).toBe(before.receipts + 1);
  });
});
