import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { PENDING_PER_SOURCE } from "../../src/ingest/kept-secrets";
import { ADMIN, adminGet, adminPost } from "../admin/support";
import { asanaDelivery, asanaHandshake } from "./support/asana-kept";
import { expectAccepted, expectRejectedAndNothingWritten, send, uniqueKey } from "./support/contract";
import { hmac, sha256Hex } from "./support/signers";

/**
 * Kept handshake secrets (Asana, Notion) through the real route and the admin API. The URL's verify token proves a
 * handshake, but it sits in URLs and so in logs: it installs a source's first secret and nothing more. A new
 * secret handed over while one is active is pending (same answer to the caller) and verifies nothing until an
 * operator approves it; revoke removes one; a genuine repeat refreshes its time; list never shows a value.
 */

const secrets = env as unknown as Record<string, string>;
const NOTION_TOKEN = secrets.KS_NOTION_VERIFY_TOKEN!;

interface Listing {
  fingerprint: string;
  status: "active" | "pending";
  receivedAt: number;
  clientAddress: string | null;
  userAgent: string | null;
}

/** What the list shows of a handshake sent with no client headers (no edge in tests). */
const NO_CLIENT = { receivedAt: expect.any(Number), clientAddress: null, userAgent: null };

async function keptSecrets(source: string): Promise<Listing[]> {
  const response = await adminGet(`/admin/api/sources/${source}/kept-secrets`);
  expect(response.status).toBe(200);
  const text = await response.text();
  const answer = JSON.parse(text) as { source: string; keptSecrets: Listing[] };
  expect(answer.source).toBe(source);
  return answer.keptSecrets;
}

const fingerprintOf = (secret: string) => sha256Hex(secret).slice(0, 16);

afterEach(() => {
  vi.restoreAllMocks();
});

describe("kept secrets: the verify token installs a source's first secret only", () => {
  it("asana: the first secret is active at once; a second one with the same verify token gets the same answer but verifies nothing", async () => {
    const source = "ks-asana";
    const lines: string[] = [];
    vi.spyOn(console, "log").mockImplementation((...args: unknown[]) => void lines.push(args.map(String).join(" ")));
    const genuine = uniqueKey("asana_genuine");
    const first = await asanaHandshake(source, genuine);
    expect(first.status).toBe(200);
    expect(first.headers.get("x-hook-secret")).toBe(genuine);
    await expectAccepted(source, asanaDelivery(genuine));

    // Someone who read the verify token in a log hands over a secret of their own.
    const forged = uniqueKey("asana_forged");
    const second = await asanaHandshake(source, forged);
    expect(second.status).toBe(200);
    expect(second.headers.get("x-hook-secret")).toBe(forged);
    await expectRejectedAndNothingWritten(source, asanaDelivery(forged));
    // The real sender is not locked out.
    await expectAccepted(source, asanaDelivery(genuine));

    expect(await keptSecrets(source)).toEqual([
      { fingerprint: await fingerprintOf(forged), status: "pending", ...NO_CLIENT },
      { fingerprint: await fingerprintOf(genuine), status: "active", ...NO_CLIENT },
    ]);
    const handshakeLines = lines.filter((line) => line.includes('"delivery.handshake"'));
    expect(handshakeLines.map((line) => JSON.parse(line).kept)).toEqual(["active", "pending"]);
    expect(lines.join("\n")).not.toContain(genuine);
    expect(lines.join("\n")).not.toContain(forged);
  });

  it("notion: the first verification_token is kept active; a later one is pending and verifies nothing", async () => {
    const source = "ks-notion";
    const handshake = (token: string) =>
      send(source, {
        url: `https://receiver.test/webhooks/${source}?verify_token=${NOTION_TOKEN}`,
        body: JSON.stringify({ verification_token: token }),
        headers: { "content-type": "application/json" },
      });
    const delivery = (token: string) => {
      const body = JSON.stringify({
        id: uniqueKey("ntn"),
        type: "page.created",
        timestamp: "2026-11-30T08:00:00.000Z",
        entity: { id: "pg_1", type: "page" },
      });
      return { body, headers: { "x-notion-signature": `sha256=${hmac("sha256", token, body).toString("hex")}` } };
    };
    const genuine = `secret_${uniqueKey("notion")}`;
    const forged = `secret_${uniqueKey("notion_forged")}`;
    expect((await handshake(genuine)).status).toBe(200);
    expect((await handshake(forged)).status).toBe(200);
    await expectAccepted(source, delivery(genuine));
    await expectRejectedAndNothingWritten(source, delivery(forged));
    expect((await keptSecrets(source)).map(({ status }) => status)).toEqual(["pending", "active"]);
  });

  it("a repeated genuine handshake refreshes the kept secret's time and leaves it active, with no second row", async () => {
    const source = "ks-asana-refresh";
    const genuine = uniqueKey("asana_refresh");
    await asanaHandshake(source, genuine);
    const [before] = await keptSecrets(source);
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect((await asanaHandshake(source, genuine)).status).toBe(200);
    const after = await keptSecrets(source);
    expect(after).toEqual([{ fingerprint: before!.fingerprint, status: "active", ...NO_CLIENT }]);
    expect(after[0]!.receivedAt).toBeGreaterThan(before!.receivedAt);
    await expectAccepted(source, asanaDelivery(genuine));
  });

  it("two first handshakes at once with different secrets make exactly one of them active", async () => {
    const source = "ks-asana-race";
    const racing = Array.from({ length: 4 }, (_, index) => uniqueKey(`asana_race_${index}`));
    const answers = await Promise.all(racing.map((secret) => asanaHandshake(source, secret)));
    expect(answers.map(({ status }) => status)).toEqual([200, 200, 200, 200]);
    const listed = await keptSecrets(source);
    expect(listed.map(({ status }) => status).sort()).toEqual(["active", "pending", "pending", "pending"]);
    const winner = racing.find(
      (secret) => fingerprintOf(secret) === listed.find(({ status }) => status === "active")!.fingerprint,
    )!;
    await expectAccepted(source, asanaDelivery(winner));
    for (const loser of racing.filter((secret) => secret !== winner))
      await expectRejectedAndNothingWritten(source, asanaDelivery(loser));
  });

  it("refuses a new pending secret once 8 wait, never dropping one, and records each handshake's address and agent", async () => {
    const source = "ks-asana-flood";
    const genuine = uniqueKey("asana_first");
    await asanaHandshake(source, genuine);
    const attacker = (index: number) => ({ "cf-connecting-ip": `203.0.113.${index}`, "user-agent": `flood/${index}` });
    const flood = Array.from({ length: PENDING_PER_SOURCE }, (_, index) => uniqueKey(`asana_flood_${index}`));
    for (const [index, secret] of flood.entries())
      expect((await asanaHandshake(source, secret, attacker(index))).status).toBe(200);

    // The genuine sender re-registering now is refused, not let in by dropping the oldest pending one.
    const replacement = uniqueKey("asana_replacement");
    const refused = await asanaHandshake(source, replacement, { "cf-connecting-ip": "198.51.100.1" });
    expect(refused.status).toBe(409);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("pending_secrets_full");
    // Nor does a full list refuse what is kept already: the active one's sender and a pending one's repeat.
    expect((await asanaHandshake(source, genuine)).status).toBe(200);
    expect((await asanaHandshake(source, flood[0]!, attacker(0))).status).toBe(200);
    await expectAccepted(source, asanaDelivery(genuine));

    const listed = await keptSecrets(source);
    expect(listed).toHaveLength(1 + PENDING_PER_SOURCE);
    expect(listed.map(({ fingerprint }) => fingerprint)).not.toContain(await fingerprintOf(replacement));
    const pending = listed.filter(({ status }) => status === "pending");
    expect(pending.map(({ fingerprint }) => fingerprint).sort()).toEqual(flood.map(fingerprintOf).sort());
    for (const [index, secret] of flood.entries()) {
      expect(pending.find(({ fingerprint }) => fingerprint === fingerprintOf(secret))).toMatchObject({
        clientAddress: `203.0.113.${index}`,
        userAgent: `flood/${index}`,
      });
    }
  });

  it("revoking every secret does not reopen the first install: the next handshake waits for approval", async () => {
    const source = "ks-asana-leak";
    const leaked = uniqueKey("asana_leaked");
    await asanaHandshake(source, leaked);
    const revoked = await adminPost(`/admin/api/sources/${source}/kept-secrets/${fingerprintOf(leaked)}/revoke`, {});
    expect(revoked.status).toBe(200);

    // Whoever read the verify token in a log hands a secret over first: it must not go active unseen.
    const intruder = uniqueKey("asana_intruder");
    expect((await asanaHandshake(source, intruder)).status).toBe(200);
    await expectRejectedAndNothingWritten(source, asanaDelivery(intruder));
    expect(await keptSecrets(source)).toEqual([
      { fingerprint: fingerprintOf(intruder), status: "pending", ...NO_CLIENT },
    ]);

    // The operator's own re-registration waits the same way, and goes live once approved.
    const renewed = uniqueKey("asana_renewed");
    await asanaHandshake(source, renewed);
    await expectRejectedAndNothingWritten(source, asanaDelivery(renewed));
    expect(
      (await adminPost(`/admin/api/sources/${source}/kept-secrets/${fingerprintOf(renewed)}/approve`, {})).status,
    ).toBe(200);
    await expectAccepted(source, asanaDelivery(renewed));
    await expectRejectedAndNothingWritten(source, asanaDelivery(intruder));
  });
});

describe("kept secrets: list, approve and revoke through the admin API", () => {
  it("approving a pending secret lets its deliveries in; revoking one shuts its deliveries out", async () => {
    const source = "ks-asana-admin";
    const original = uniqueKey("asana_original");
    const replacement = uniqueKey("asana_replacement");
    await asanaHandshake(source, original);
    await asanaHandshake(source, replacement);
    await expectRejectedAndNothingWritten(source, asanaDelivery(replacement));

    const listing = await adminGet(`/admin/api/sources/${source}/kept-secrets`);
    const listed = await listing.text();
    expect(listed).not.toContain(original);
    expect(listed).not.toContain(replacement);

    const approved = await adminPost(
      `/admin/api/sources/${source}/kept-secrets/${await fingerprintOf(replacement)}/approve`,
      {},
    );
    expect(approved.status).toBe(200);
    expect(await approved.json()).toEqual({
      source,
      approved: { fingerprint: await fingerprintOf(replacement), status: "active", ...NO_CLIENT },
    });
    await expectAccepted(source, asanaDelivery(replacement));
    await expectAccepted(source, asanaDelivery(original));

    const revoked = await adminPost(
      `/admin/api/sources/${source}/kept-secrets/${await fingerprintOf(original)}/revoke`,
      {},
    );
    expect(revoked.status).toBe(200);
    expect(await revoked.json()).toEqual({
      source,
      revoked: { fingerprint: await fingerprintOf(original), status: "active", ...NO_CLIENT },
    });
    await expectRejectedAndNothingWritten(source, asanaDelivery(original));
    await expectAccepted(source, asanaDelivery(replacement));
    expect((await keptSecrets(source)).map(({ fingerprint }) => fingerprint)).toEqual([
      await fingerprintOf(replacement),
    ]);
  });

  it("answers a clear 4xx for an unknown source, a source that keeps no secrets, a malformed or unknown fingerprint, and no token", async () => {
    const errorCode = async (response: Response | Promise<Response>, status: number) => {
      const answer = await response;
      expect(answer.status).toBe(status);
      return ((await answer.json()) as { error: { code: string } }).error.code;
    };
    expect(await errorCode(adminGet("/admin/api/sources/no-such-source/kept-secrets"), 404)).toBe("unknown_source");
    expect(await errorCode(adminGet("/admin/api/sources/demo/kept-secrets"), 400)).toBe("no_kept_secrets");
    expect(await errorCode(adminPost("/admin/api/sources/ks-asana/kept-secrets/NOT-HEX/approve", {}), 400)).toBe(
      "invalid_fingerprint",
    );
    expect(
      await errorCode(adminPost(`/admin/api/sources/ks-asana/kept-secrets/${"0".repeat(16)}/revoke`, {}), 404),
    ).toBe("kept_secret_not_found");
    expect(await errorCode(adminGet("/admin/api/sources/ks-asana/kept-secrets?x=1"), 400)).toBe("unknown_parameter");
    expect(
      await errorCode(
        adminGet("/admin/api/sources/ks-asana/kept-secrets", { authorization: `${ADMIN.authorization}x` }),
        401,
      ),
    ).toBe("unauthorized");
  });
});
