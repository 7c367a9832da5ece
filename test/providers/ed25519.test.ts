import { verifyKey } from "discord-interactions";
import { describe, expect, it } from "vitest";
import {
  adapterContract,
  expectAccepted,
  expectRejectedAndNothingWritten,
  header,
  nowSeconds,
  secretValue,
  send,
  storedCounts,
  uniqueKey,
  withHeader,
} from "./support/contract";
import { ed25519Sign } from "./support/signers";

// Discord-style senders (provider "discord", an alias of "ed25519"): hex Ed25519 over timestamp ‖ body.
function signEd25519(secretName: string, body: string, timestamp: number) {
  return {
    body,
    headers: {
      "x-signature-ed25519": ed25519Sign(secretName, String(timestamp), body).toString("hex"),
      "x-signature-timestamp": String(timestamp),
      "content-type": "application/json",
    },
  };
}

const interaction = (interactionId: string) =>
  JSON.stringify({ id: interactionId, type: 2, application_id: "app1", data: { id: `cmd-${interactionId}`, name: "ping" } });

adapterContract({
  name: "ed25519",
  sign: ({ secretName, eventKey, timestamp }) => signEd25519(secretName, interaction(eventKey), timestamp),
  expected: ({ eventKey }) => ({ eventKey, eventType: "2", subjectId: `cmd-${eventKey}` }),
  signatureHeaders: ["x-signature-ed25519", "x-signature-timestamp"],
  malformEncoding: (request) => withHeader(request, "x-signature-ed25519", header(request, "x-signature-ed25519").slice(1)),
  junkSignature: (request) => withHeader(request, "x-signature-ed25519", "00".repeat(64)),
  timestamped: true,
});

describe("ed25519: compatibility", () => {
  it("Discord's own verifier (discord-interactions verifyKey) accepts the interaction the route accepts", async () => {
    const timestamp = nowSeconds();
    const request = signEd25519("PV_ED25519_CURRENT", interaction(uniqueKey("discord_lib")), timestamp);
    const publicKey = secretValue("ed25519", "CURRENT");
    expect(await verifyKey(request.body, request.headers["x-signature-ed25519"], String(timestamp), publicKey)).toBe(true);
    expect(await verifyKey(request.body, request.headers["x-signature-ed25519"], String(timestamp), secretValue("ed25519", "TEST"))).toBe(false);
    await expectAccepted("pv-ed25519", request);
  });
});

describe("ed25519: PING handshake", () => {
  it("answers a verified PING with {type: 1} and claims nothing", async () => {
    const before = await storedCounts("pv-ed25519");
    const response = await send("pv-ed25519", signEd25519("PV_ED25519_CURRENT", JSON.stringify({ id: "ping-1", type: 1 }), nowSeconds()));
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ type: 1 });
    expect(await storedCounts("pv-ed25519")).toEqual(before);
  });

  it("an unverified PING is refused", async () => {
    await expectRejectedAndNothingWritten("pv-ed25519", signEd25519("PV_ED25519_UNLISTED", JSON.stringify({ id: "ping-2", type: 1 }), nowSeconds()));
  });
});
