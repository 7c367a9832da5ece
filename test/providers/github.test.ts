import { sign } from "@octokit/webhooks-methods";
import { describe, expect, it } from "vitest";
import { github } from "../../src/providers/github";
import { adapterContract, expectAccepted, header, storedReceipt, uniqueKey, withHeader } from "./support/contract";

// GitHub's maintained signer (@octokit/webhooks-methods) signs; the route verifies.
adapterContract({
  name: "github",
  async sign({ secret, eventKey }) {
    const body = JSON.stringify({
      action: "opened",
      number: 7,
      repository: { full_name: "acme/app" },
      hook_delivery: eventKey,
    });
    return {
      body,
      headers: {
        "x-hub-signature-256": await sign(secret, body),
        "x-github-delivery": eventKey,
        "x-github-event": "pull_request",
        "x-github-hook-id": "4242",
        "content-type": "application/json",
      },
    };
  },
  expected: ({ eventKey }) => ({
    eventKey,
    eventType: "pull_request",
    kept: { "x-github-hook-id": "4242", action: "opened" },
  }),
  signatureHeaders: ["x-hub-signature-256"],
  malformEncoding: (request) => withHeader(request, "x-hub-signature-256", "sha256=abc"),
  junkSignature: (request) =>
    withHeader(request, "x-hub-signature-256", `sha1=${header(request, "x-hub-signature-256").slice(7, 47)}`),
  timestamped: false,
});

describe("github: scheme specifics", () => {
  it('GitHub\'s documented example verifies through the route (secret "It\'s a Secret to Everybody", body "Hello, World!")', async () => {
    const eventKey = uniqueKey("gh_docs");
    const receiptId = await expectAccepted("pv-github-docs", {
      body: "Hello, World!",
      headers: {
        "x-hub-signature-256": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
        "x-github-delivery": eventKey,
        "x-github-event": "ping",
      },
    });
    expect((await storedReceipt("pv-github-docs", receiptId)).eventKey).toBe(eventKey);
  });

  it("the ping sent when a hook is created is recorded as an event of type ping", async () => {
    const eventKey = uniqueKey("gh_ping");
    const secret = "It's a Secret to Everybody";
    const body = JSON.stringify({ zen: "Keep it logically awesome.", hook_id: 1 });
    const receiptId = await expectAccepted("pv-github-docs", {
      body,
      headers: {
        "x-hub-signature-256": await sign(secret, body),
        "x-github-delivery": eventKey,
        "x-github-event": "ping",
      },
    });
    expect((await storedReceipt("pv-github-docs", receiptId)).eventType).toBe("ping");
  });

  it("the documented example fails with the body's last byte changed (adapter)", async () => {
    const verdict = await github.verify({
      rawBody: new TextEncoder().encode("Hello, World?"),
      headers: new Headers({
        "x-hub-signature-256": "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17",
      }),
      url: "https://receiver.test/webhooks/x",
      secrets: [{ name: "S", value: "It's a Secret to Everybody" }],
      now: Date.now(),
      options: {},
    });
    expect(verdict).toEqual({ kind: "rejected", reason: "signature-mismatch" });
  });
});
