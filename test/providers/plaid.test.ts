import { env } from "cloudflare:workers";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { redirectKeyFetchesForTests } from "../../src/providers/key-fetch";
import { claimAnswer, expectAccepted, expectRejectedAndNothingWritten, send, storedCounts, storedReceipt, uniqueKey } from "./support/contract";
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

async function publishedKey(options: { expired?: boolean } = {}): Promise<SigningKey> {
  const { publicKey, privateKey } = await generateKeyPair("ES256", { extractable: true });
  const kid = uniqueKey("kid");
  const key = { ...(await exportJWK(publicKey)), kid, alg: "ES256", use: "sig", created_at: 1_700_000_000, expired_at: options.expired ? 1_700_000_100 : null };
  const response = await fetch(`${standin()}/__plaid/${kid}`, { method: "PUT", body: JSON.stringify({ secret: plaidSecret(), key }) });
  expect(response.status).toBe(204);
  return { kid, privateKey };
}

async function keyFetches(): Promise<number> {
  return Number(await (await fetch(`${standin()}/__fetches?path=${encodeURIComponent(KEY_ENDPOINT)}`)).text());
}

function webhookBody(): string {
  return JSON.stringify({ webhook_type: "TRANSACTIONS", webhook_code: "SYNC_UPDATES_AVAILABLE", item_id: "item-42", marker: uniqueKey("plaid") });
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
    await expectRejectedAndNothingWritten(SOURCE, await signed(body, current, { iat: Math.floor(Date.now() / 1000) - 6 * 60 }));
    await expectRejectedAndNothingWritten(SOURCE, await signed(body, current, { iat: Math.floor(Date.now() / 1000) + 10 * 60 }));
    const unpublished = { kid: uniqueKey("unknown"), privateKey: current.privateKey };
    await expectRejectedAndNothingWritten(SOURCE, await signed(body, unpublished));
    await expectRejectedAndNothingWritten(SOURCE, await signed(body, await publishedKey({ expired: true })));
    const other = await publishedKey();
    await expectRejectedAndNothingWritten(SOURCE, await signed(body, { kid: current.kid, privateKey: other.privateKey }));
    await expectRejectedAndNothingWritten(SOURCE, { body, headers: { "content-type": "application/json" } });
    await expectRejectedAndNothingWritten(SOURCE, { body, headers: { "plaid-verification": "not.a.jwt" } });
  });

  it("answers 503 while the key cannot be fetched, writing nothing", async () => {
    const down = { kid: uniqueKey("down"), privateKey: current.privateKey };
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
