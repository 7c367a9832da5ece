import { describe, expect, it } from "vitest";
import {
  adapterContract,
  expectAccepted,
  expectRejectedAndNothingWritten,
  nowSeconds,
  secretValue,
  send,
  storedCounts,
  storedReceipt,
  uniqueKey,
  withHeader,
} from "./support/contract";
import { hmac } from "./support/signers";

// Twitch publishes no signer; node:crypto signs with the documented recipe: id ‖ timestamp ‖ body.
function signTwitch(
  secret: string,
  messageId: string,
  timestampSeconds: number,
  body: string,
  messageType = "notification",
) {
  const timestamp = new Date(timestampSeconds * 1000).toISOString().replace("Z", "123456Z"); // Twitch sends nanoseconds
  return {
    body,
    headers: {
      "twitch-eventsub-message-id": messageId,
      "twitch-eventsub-message-timestamp": timestamp,
      "twitch-eventsub-message-signature": `sha256=${hmac("sha256", secret, messageId, timestamp, body).toString("hex")}`,
      "twitch-eventsub-message-type": messageType,
      "twitch-eventsub-subscription-type": "channel.follow",
      "twitch-eventsub-subscription-version": "2",
      "content-type": "application/json",
    },
  };
}

const notification = (subscriptionId: string) =>
  JSON.stringify({
    subscription: { id: subscriptionId, type: "channel.follow", version: "2", status: "enabled" },
    event: { user_id: "1234", broadcaster_user_id: "1337" },
  });

adapterContract({
  name: "twitch",
  sign: ({ secret, eventKey, timestamp }) => signTwitch(secret, eventKey, timestamp, notification(`sub-${eventKey}`)),
  expected: ({ eventKey }) => ({ eventKey, eventType: "channel.follow", subjectId: `sub-${eventKey}` }),
  signatureHeaders: [
    "twitch-eventsub-message-signature",
    "twitch-eventsub-message-timestamp",
    "twitch-eventsub-message-id",
  ],
  malformEncoding: (request) => withHeader(request, "twitch-eventsub-message-signature", "sha256=0g"),
  junkSignature: (request) => withHeader(request, "twitch-eventsub-message-signature", "sha512=,sha256"),
  timestamped: true,
});

describe("twitch: verification challenge and revocation", () => {
  it("answers a verified webhook_callback_verification with the raw challenge, and claims nothing", async () => {
    const challenge = uniqueKey("pogchamp-kappa");
    const body = JSON.stringify({
      challenge,
      subscription: { id: "sub-1", type: "channel.follow", status: "webhook_callback_verification_pending" },
    });
    const before = await storedCounts("pv-twitch");
    const response = await send(
      "pv-twitch",
      signTwitch(
        secretValue("twitch", "CURRENT"),
        uniqueKey("verify"),
        nowSeconds(),
        body,
        "webhook_callback_verification",
      ),
    );
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/plain/);
    expect(await response.text()).toBe(challenge);
    expect(await storedCounts("pv-twitch")).toEqual(before);
  });

  it("an unverified challenge is refused, not answered", async () => {
    const body = JSON.stringify({ challenge: "echo", subscription: { id: "sub-1" } });
    await expectRejectedAndNothingWritten(
      "pv-twitch",
      signTwitch(
        secretValue("twitch", "UNLISTED"),
        uniqueKey("verify"),
        nowSeconds(),
        body,
        "webhook_callback_verification",
      ),
    );
  });

  it("a revocation is recorded as an event of type revocation", async () => {
    const messageId = uniqueKey("revoke");
    const body = JSON.stringify({
      subscription: { id: `sub-${messageId}`, type: "channel.follow", status: "authorization_revoked" },
    });
    const receiptId = await expectAccepted(
      "pv-twitch",
      signTwitch(secretValue("twitch", "CURRENT"), messageId, nowSeconds(), body, "revocation"),
    );
    const stored = await storedReceipt("pv-twitch", receiptId);
    expect(stored.eventType).toBe("revocation");
    expect(stored.keptHeaders["twitch-eventsub-message-type"]).toBe("revocation");
  });
});
