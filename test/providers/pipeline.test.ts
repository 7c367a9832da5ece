import { sign } from "@octokit/webhooks-methods";
import { describe, expect, it } from "vitest";
import { verifySignature } from "../../src/crypto/verify";
import { github } from "../../src/providers/github";
import { MAX_SIGNATURE_ENTRIES, parseSignatureList } from "../../src/providers/signed";
import { standardWebhooks } from "../../src/providers/standard-webhooks";
import type { DeliveryInput } from "../../src/providers/types";
import { secretValue, send, storedCounts, uniqueKey } from "./support/contract";

/** The shared pieces every adapter runs through (src/providers/signed.ts, src/crypto/verify.ts). */

const encoder = new TextEncoder();
const input = (overrides: Partial<DeliveryInput>): DeliveryInput => ({
  rawBody: encoder.encode("{}"),
  headers: new Headers(),
  url: "https://receiver.test/webhooks/x",
  secrets: [{ name: "S", value: "secret" }],
  now: Date.now(),
  options: {},
  ...overrides,
});

describe("shared verification pipeline", () => {
  it("a source whose every secret has expired accepts nothing, even signed with one of them: 503, so the sender retries", async () => {
    const body = JSON.stringify({ zen: uniqueKey("expired_only") });
    const before = await storedCounts("pv-expired-only");
    const response = await send("pv-expired-only", {
      body,
      headers: {
        "x-hub-signature-256": await sign(secretValue("github", "CURRENT"), body),
        "x-github-delivery": uniqueKey("d"),
        "x-github-event": "ping",
      },
    });
    // A configuration problem, not the sender's: a 401 would read as final.
    expect(response.status).toBe(503);
    expect(((await response.json()) as { error: { code: string } }).error.code).toBe("source_secrets_expired");
    expect(await storedCounts("pv-expired-only")).toEqual(before);
  });

  it("names the failed part for the logs: no usable secret, oversized header, overlong event key", async () => {
    const body = "{}";
    const signature = await sign("secret", body);
    expect(
      await github.verify(input({ secrets: [], headers: new Headers({ "x-hub-signature-256": signature }) })),
    ).toEqual({
      kind: "rejected",
      reason: "no-usable-secret",
    });
    // An oversized id header is refused, never treated as absent (which would silently switch to a payload-hash key).
    const hugeDelivery = new Headers({ "x-hub-signature-256": signature, "x-github-delivery": "d".repeat(5000) });
    expect(await github.verify(input({ headers: hugeDelivery }))).toEqual({
      kind: "rejected",
      reason: "malformed-signature",
    });
    const longKey = new Headers({ "x-hub-signature-256": signature, "x-github-delivery": "d".repeat(600) });
    expect(await github.verify(input({ headers: longKey }))).toEqual({ kind: "rejected", reason: "malformed-payload" });
  });

  it("a source's *_path options override where an adapter reads the type and subject", async () => {
    const body = JSON.stringify({ action: "opened", pull_request: { node_id: "PR_1" } });
    const headers = new Headers({
      "x-hub-signature-256": await sign("secret", body),
      "x-github-delivery": "d-1",
      "x-github-event": "pull_request",
    });
    const verdict = await github.verify(
      input({
        rawBody: encoder.encode(body),
        headers,
        options: { type_path: "action", subject_path: "pull_request.node_id" },
      }),
    );
    expect(verdict).toMatchObject({
      kind: "event",
      identity: { eventKey: "d-1", eventType: "opened", subjectId: "PR_1" },
    });
  });

  it("signature lists: junk entries are skipped, more than the cap is refused", () => {
    expect(parseSignatureList("t=1,v1=ab,,junk,=x,v1=cd", ",", "=")).toEqual([
      ["t", "1"],
      ["v1", "ab"],
      ["v1", "cd"],
    ]);
    expect(
      parseSignatureList(Array.from({ length: MAX_SIGNATURE_ENTRIES + 1 }, () => "v1,aa").join(" "), " ", ","),
    ).toBeNull();
    expect(parseSignatureList("   ", " ", ",")).toBeNull();
  });

  it("a non-numeric or padded timestamp is malformed, not coerced", async () => {
    for (const timestamp of ["1e9", "-5", "0x10", "1700000000.5", "17OO000000"]) {
      const headers = new Headers({
        "webhook-id": "msg_1",
        "webhook-timestamp": timestamp,
        "webhook-signature": `v1,${"A".repeat(43)}=`,
      });
      expect(await standardWebhooks.verify(input({ headers })), timestamp).toEqual({
        kind: "rejected",
        reason: "malformed-signature",
      });
    }
  });

  it("verifySignature answers false, never throws, for keys and signatures in the wrong shape", async () => {
    const data = encoder.encode("x");
    expect(
      await verifySignature({ algorithm: "ed25519", material: new Uint8Array(31) }, new Uint8Array(64), data),
    ).toBe(false);
    expect(
      await verifySignature(
        { algorithm: "ecdsa-p256-sha256", material: encoder.encode("not spki") },
        new Uint8Array(64),
        data,
      ),
    ).toBe(false);
    expect(
      await verifySignature({ algorithm: "hmac-sha256", material: encoder.encode("k") }, new Uint8Array(3), data),
    ).toBe(false);
    expect(
      await verifySignature({ algorithm: "token", material: encoder.encode("token") }, encoder.encode("token"), data),
    ).toBe(true);
    expect(
      await verifySignature({ algorithm: "token", material: encoder.encode("token") }, encoder.encode("token "), data),
    ).toBe(false);
  });
});
