import { runInDurableObject } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { shardsOf } from "../../../src/claims/routing";
import type { ClaimShard } from "../../../src/claims/shard";
import { everyClaim } from "../../support/storage";

/**
 * The behaviour every provider adapter shares, run against each one through the real HTTP route
 * (exports.default.fetch → verify → claim shard → relay → D1). Each adapter's test file says only how its sender
 * signs; this file checks: the valid delivery and its stored identity, rotation with expiry, test-mode vs live,
 * and every broken part answering 401 with nothing written in the claim shards or in D1.
 *
 * Sources come from test/fixtures/sources/providers.json: `pv-<name>` (live: CURRENT, PREVIOUS expiring in 2099,
 * EXPIRED since 2020) and `pv-<name>-test` (TEST). UNLISTED is a well-formed secret no source lists.
 */

export type SecretRole = "CURRENT" | "PREVIOUS" | "EXPIRED" | "TEST" | "UNLISTED";

export function secretName(name: string, role: SecretRole): string {
  return `PV_${name.replace(/-/g, "_").toUpperCase()}_${role}`;
}

export function secretValue(name: string, role: SecretRole): string {
  const value = (env as unknown as Record<string, unknown>)[secretName(name, role)];
  if (typeof value !== "string") throw new Error(`fixture secret ${secretName(name, role)} is missing`);
  return value;
}

export interface SignedRequest {
  /** Defaults to https://receiver.test/webhooks/<source>. */
  url?: string;
  body: Uint8Array | string;
  headers: Record<string, string>;
}

export interface SignArgs {
  /** The secret's value (an HMAC secret, or for asymmetric schemes the public key listed by the source). */
  secret: string;
  secretName: string;
  eventKey: string;
  /** Unix seconds to sign at. */
  timestamp: number;
  source: string;
}

export interface ExpectedReceipt {
  eventKey: string;
  eventType: string | null;
  subjectId?: string | null;
  version?: number | null;
  occurredAt?: number | null;
  /** Header or annotation values the receipt's kept_headers must hold. */
  kept?: Record<string, string>;
}

export interface AdapterSpec {
  /** Fixture name: sources pv-<name> and pv-<name>-test, secrets PV_<NAME>_<ROLE>. */
  name: string;
  sign(args: SignArgs): Promise<SignedRequest> | SignedRequest;
  expected(args: SignArgs, request: SignedRequest): Promise<ExpectedReceipt> | ExpectedReceipt;
  /** Headers the signature needs (removed one at a time for "missing header"); the first is the signature itself, never kept. */
  signatureHeaders: string[];
  /** The request with its signature in a broken encoding (odd-length hex, invalid base64…). */
  malformEncoding(request: SignedRequest): SignedRequest;
  /** The request with its signature replaced by junk-only entries. */
  junkSignature(request: SignedRequest): SignedRequest;
  /** Signs a time, so stale and future timestamps must fail. */
  timestamped: boolean;
  /** Changes one byte the signature covers; defaults to the middle byte of the body. */
  tamper?(request: SignedRequest): SignedRequest;
}

let counter = 0;
export function uniqueKey(name: string): string {
  counter += 1;
  return `${name}_${Date.now().toString(36)}_${counter}`;
}

export const nowSeconds = () => Math.floor(Date.now() / 1000);

export function send(source: string, request: SignedRequest): Promise<Response> {
  const url = request.url ?? `https://receiver.test/webhooks/${source}`;
  return exports.default.fetch(new Request(url, { method: "POST", body: request.body, headers: request.headers }));
}

export function bodyBytes(body: Uint8Array | string): Uint8Array {
  return typeof body === "string" ? new TextEncoder().encode(body) : body;
}

/** One byte changed in the middle of the body: the smallest tamper there is. */
export function flipMiddleByte(request: SignedRequest): SignedRequest {
  const bytes = new Uint8Array(bodyBytes(request.body));
  const middle = Math.floor(bytes.length / 2);
  // Stay printable and inside the same JSON token: swap between two letters/digits.
  bytes[middle] = bytes[middle] === 0x61 ? 0x62 : bytes[middle] === 0x30 ? 0x31 : bytes[middle]! ^ 0x01;
  return { ...request, body: bytes };
}

export function withHeader(request: SignedRequest, name: string, value: string | null): SignedRequest {
  const headers = { ...request.headers };
  for (const existing of Object.keys(headers))
    if (existing.toLowerCase() === name.toLowerCase()) delete headers[existing];
  if (value !== null) headers[name] = value;
  return { ...request, headers };
}

export function header(request: SignedRequest, name: string): string {
  const found = Object.entries(request.headers).find(([existing]) => existing.toLowerCase() === name.toLowerCase());
  if (!found) throw new Error(`request has no ${name} header`);
  return found[1];
}

/** Relays everything the source's shards hold, so D1 reflects every claim: the shards side by side. */
async function relayAll(source: string): Promise<void> {
  await Promise.all(
    shardsOf(env, source).map(async (shard) => {
      for (let round = 0; round < 10 && (await shard.relay()).remaining > 0; round++);
    }),
  );
}

/**
 * Claims in the source's shards and receipts in D1, after relaying: equal before and after means nothing written.
 * The shards are asked side by side (eight of them: one after another, two counts per rejected request made the
 * flood tests of test/providers/ spend most of their time waiting on round trips); D1 is read after every shard.
 */
export async function storedCounts(source: string): Promise<{ claims: number; receipts: number }> {
  await relayAll(source);
  const perShard = await Promise.all(
    shardsOf(env, source).map((shard) =>
      runInDurableObject(
        shard,
        (_instance: ClaimShard, state) =>
          state.storage.sql
            .exec<{ count: number }>(
              `SELECT COUNT(*) AS count FROM ${everyClaim(state.storage.sql)} WHERE relay_pending IN (0, 1) AND source = ?`,
              source,
            )
            .one().count,
      ),
    ),
  );
  const claims = perShard.reduce((sum, count) => sum + count, 0);
  const row = await env.DB.prepare("SELECT COUNT(*) AS count FROM receipts WHERE source = ?")
    .bind(source)
    .first<{ count: number }>();
  return { claims, receipts: row!.count };
}

/** Sends, and proves the answer is the one 401 envelope and that neither the shards nor D1 gained a row. */
export async function expectRejectedAndNothingWritten(source: string, request: SignedRequest): Promise<void> {
  const before = await storedCounts(source);
  const response = await send(source, request);
  expect(response.status).toBe(401);
  expect(await response.json()).toEqual({
    error: { code: "signature_invalid", message: "The delivery's signature could not be verified." },
  });
  expect(await storedCounts(source)).toEqual(before);
}

export interface StoredReceipt {
  eventKey: string;
  eventType: string | null;
  subjectId: string | null;
  version: number | null;
  occurredAt: number | null;
  keptHeaders: Record<string, string>;
}

export async function storedReceipt(source: string, receiptId: string): Promise<StoredReceipt> {
  await relayAll(source);
  const row = await env.DB.prepare(
    `SELECT event_key AS eventKey, event_type AS eventType, subject AS subjectId, version, occurred_at AS occurredAt,
       kept_headers AS keptHeaders FROM receipts WHERE id = ?`,
  )
    .bind(receiptId)
    .first<Omit<StoredReceipt, "keptHeaders"> & { keptHeaders: string | null }>();
  if (!row) throw new Error(`receipt ${receiptId} is not in D1`);
  return { ...row, keptHeaders: JSON.parse(row.keptHeaders ?? "{}") };
}

/**
 * What the receiver said about a claimed delivery: from its own JSON answer, or — for a sender whose adapter
 * shapes the answer (Discord) — from the x-webhook-receipt / x-webhook-disposition headers.
 */
export async function claimAnswer(response: Response): Promise<{ status: string; receipt: string }> {
  const receipt = response.headers.get("x-webhook-receipt");
  if (receipt !== null) return { status: response.headers.get("x-webhook-disposition") ?? "", receipt };
  return response.json<{ status: string; receipt: string }>();
}

export async function expectAccepted(source: string, request: SignedRequest): Promise<string> {
  const response = await send(source, request);
  const body = await claimAnswer(response);
  expect({ status: response.ok, disposition: body.status }).toEqual({ status: true, disposition: "accepted" });
  return body.receipt;
}

/** Registers the shared contract for one adapter. */
export function adapterContract(spec: AdapterSpec): void {
  const live = `pv-${spec.name}`;
  const testMode = `pv-${spec.name}-test`;
  const signWith = async (role: SecretRole, overrides: Partial<SignArgs> = {}) => {
    const args: SignArgs = {
      secret: secretValue(spec.name, role),
      secretName: secretName(spec.name, role),
      eventKey: uniqueKey(spec.name),
      timestamp: nowSeconds(),
      source: role === "TEST" ? testMode : live,
      ...overrides,
    };
    return { args, request: await spec.sign(args) };
  };

  describe(`${spec.name}: shared adapter contract`, () => {
    it("accepts a valid delivery through the HTTP route and stores the provider's identity", async () => {
      const { args, request } = await signWith("CURRENT");
      const receiptId = await expectAccepted(live, request);
      const expected = await spec.expected(args, request);
      const stored = await storedReceipt(live, receiptId);
      expect(stored.eventKey).toBe(expected.eventKey);
      expect(stored.eventType).toBe(expected.eventType);
      if (expected.subjectId !== undefined) expect(stored.subjectId).toBe(expected.subjectId);
      if (expected.version !== undefined) expect(stored.version).toBe(expected.version);
      if (expected.occurredAt !== undefined) expect(stored.occurredAt).toBe(expected.occurredAt);
      if (expected.kept) expect(stored.keptHeaders).toMatchObject(expected.kept);
      if (spec.signatureHeaders[0])
        expect(Object.keys(stored.keptHeaders)).not.toContain(spec.signatureHeaders[0].toLowerCase());

      // The same delivery again is a duplicate of the same receipt, not a second event.
      const again = await send(live, request);
      expect(await claimAnswer(again)).toEqual({ status: "duplicate", receipt: receiptId });
    });

    it("rotation: a listed secret before its expiry verifies; after its expiry it is refused", async () => {
      const previous = await signWith("PREVIOUS");
      await expectAccepted(live, previous.request);
      const expired = await signWith("EXPIRED");
      await expectRejectedAndNothingWritten(live, expired.request);
    });

    it("a secret no source lists is refused", async () => {
      const { request } = await signWith("UNLISTED");
      await expectRejectedAndNothingWritten(live, request);
    });

    it("test mode and live are separate sources: the test secret verifies only the test source", async () => {
      const onTest = await signWith("TEST");
      await expectAccepted(testMode, onTest.request);
      const onLive = await signWith("TEST", { source: live });
      await expectRejectedAndNothingWritten(live, onLive.request);
      const liveOnTest = await signWith("CURRENT", { source: testMode });
      await expectRejectedAndNothingWritten(testMode, liveOnTest.request);
    });

    it("one changed byte in the signed content is refused", async () => {
      const { request } = await signWith("CURRENT");
      await expectRejectedAndNothingWritten(live, (spec.tamper ?? flipMiddleByte)(request));
    });

    it("each missing signature header is refused", async () => {
      for (const name of spec.signatureHeaders) {
        const { request } = await signWith("CURRENT");
        await expectRejectedAndNothingWritten(live, withHeader(request, name, null));
      }
    });

    it("a signature in a malformed encoding, or a list of junk entries, is refused with a 401 (never a 500)", async () => {
      const malformed = await signWith("CURRENT");
      await expectRejectedAndNothingWritten(live, spec.malformEncoding(malformed.request));
      const junk = await signWith("CURRENT");
      await expectRejectedAndNothingWritten(live, spec.junkSignature(junk.request));
    });

    it("huge signature headers are refused without being parsed", async () => {
      for (const name of spec.signatureHeaders) {
        const { request } = await signWith("CURRENT");
        const original = header(request, name);
        await expectRejectedAndNothingWritten(
          live,
          withHeader(request, name, original + " ".repeat(8) + "A".repeat(64 * 1024)),
        );
      }
    });

    if (spec.timestamped) {
      it("a timestamp outside the tolerance, past or future, is refused even with a valid signature", async () => {
        const stale = await signWith("CURRENT", { timestamp: nowSeconds() - 3600 });
        await expectRejectedAndNothingWritten(live, stale.request);
        const future = await signWith("CURRENT", { timestamp: nowSeconds() + 3600 });
        await expectRejectedAndNothingWritten(live, future.request);
      });
    }
  });
}
