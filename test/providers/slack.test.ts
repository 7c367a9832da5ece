import { describe, expect, it } from "vitest";
import { slack } from "../../src/providers/slack";
import {
  adapterContract,
  expectAccepted,
  expectRejectedAndNothingWritten,
  header,
  nowSeconds,
  secretValue,
  send,
  storedCounts,
  storedReceipt,
  uniqueKey,
  withHeader,
} from "./support/contract";
import { hmac, sha256Hex } from "./support/signers";

// Slack's Bolt verifier is not a signer; node:crypto signs with the documented recipe `v0:${ts}:${body}`.
function signSlack(secret: string, body: string, timestamp: number, extra: Record<string, string> = {}) {
  return {
    body,
    headers: {
      "x-slack-signature": `v0=${hmac("sha256", secret, `v0:${timestamp}:`, body).toString("hex")}`,
      "x-slack-request-timestamp": String(timestamp),
      "content-type": "application/json",
      ...extra,
    },
  };
}

const eventCallback = (eventKey: string) =>
  JSON.stringify({
    token: "legacy",
    team_id: "T1",
    type: "event_callback",
    event_id: eventKey,
    event_time: 1_700_000_000,
    event: { type: "reaction_added", user: "U1", item: { type: "message", ts: "1700000000.000100" } },
  });

adapterContract({
  name: "slack",
  sign: ({ secret, eventKey, timestamp }) => signSlack(secret, eventCallback(eventKey), timestamp),
  expected: ({ eventKey }) => ({
    eventKey,
    eventType: "reaction_added",
    subjectId: "1700000000.000100",
    occurredAt: 1_700_000_000_000,
  }),
  signatureHeaders: ["x-slack-signature", "x-slack-request-timestamp"],
  malformEncoding: (request) =>
    withHeader(request, "x-slack-signature", `v0=${header(request, "x-slack-signature").slice(4)}`),
  junkSignature: (request) => withHeader(request, "x-slack-signature", "v1=abcd,v0=,v0=zz"),
  timestamped: true,
});

// The worked example in Slack's "Verifying requests from Slack" docs (a slash command, form-encoded).
const DOCS = {
  secret: "8f742231b10e8888abcd99yyyzzz85a5",
  timestamp: "1531420618",
  body:
    "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar" +
    "&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com" +
    "%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c",
  signature: "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503",
};

describe("slack: scheme specifics", () => {
  it("Slack's documented example verifies at its own time and is refused five minutes later (adapter, injected clock)", async () => {
    const verifyAt = (nowSeconds: number) =>
      slack.verify({
        rawBody: new TextEncoder().encode(DOCS.body),
        headers: new Headers({ "x-slack-signature": DOCS.signature, "x-slack-request-timestamp": DOCS.timestamp }),
        url: "https://receiver.test/webhooks/slack",
        secrets: [{ name: "SLACK_SIGNING_SECRET", value: DOCS.secret }],
        now: nowSeconds * 1000,
        options: {},
      });
    const verdict = await verifyAt(Number(DOCS.timestamp) + 1);
    expect(verdict).toMatchObject({
      kind: "event",
      identity: { eventKey: sha256Hex(DOCS.body), eventKeyOrigin: "payload-sha256" },
    });
    expect(await verifyAt(Number(DOCS.timestamp) + 301)).toEqual({
      kind: "rejected",
      reason: "timestamp-out-of-tolerance",
    });
  });

  it("Slack's documented example verifies through the route (a source whose tolerance admits its 2018 timestamp)", async () => {
    const receiptId = await expectAccepted("pv-slack-docs", {
      body: DOCS.body,
      headers: {
        "x-slack-signature": DOCS.signature,
        "x-slack-request-timestamp": DOCS.timestamp,
        "content-type": "application/x-www-form-urlencoded",
      },
    });
    expect((await storedReceipt("pv-slack-docs", receiptId)).eventKey).toBe(sha256Hex(DOCS.body));
  });

  it("answers a verified url_verification with its challenge, and claims nothing", async () => {
    const challenge = uniqueKey("challenge");
    const body = JSON.stringify({ token: "legacy", challenge, type: "url_verification" });
    const before = await storedCounts("pv-slack");
    const response = await send("pv-slack", signSlack(secretValue("slack", "CURRENT"), body, nowSeconds()));
    expect(response.status).toBe(200);
    expect(await response.text()).toBe(challenge);
    expect(await storedCounts("pv-slack")).toEqual(before);
  });

  it("never answers an unverified url_verification: the challenge is not echoed", async () => {
    const body = JSON.stringify({ token: "legacy", challenge: "echo-me", type: "url_verification" });
    await expectRejectedAndNothingWritten("pv-slack", signSlack(secretValue("slack", "UNLISTED"), body, nowSeconds()));
    await expectRejectedAndNothingWritten("pv-slack", { body, headers: { "content-type": "application/json" } });
  });

  it("a retry (X-Slack-Retry-Num) of one event_id is a duplicate; the retry headers are kept with the receipt", async () => {
    const eventKey = uniqueKey("slack_retry");
    const secret = secretValue("slack", "CURRENT");
    const first = signSlack(secret, eventCallback(eventKey), nowSeconds(), {
      "x-slack-retry-num": "1",
      "x-slack-retry-reason": "http_timeout",
    });
    const receiptId = await expectAccepted("pv-slack", first);
    const retry = signSlack(secret, eventCallback(eventKey), nowSeconds(), {
      "x-slack-retry-num": "2",
      "x-slack-retry-reason": "http_timeout",
    });
    expect(await (await send("pv-slack", retry)).json()).toEqual({ status: "duplicate", receipt: receiptId });
    expect((await storedReceipt("pv-slack", receiptId)).keptHeaders).toMatchObject({
      "x-slack-retry-num": "1",
      "x-slack-retry-reason": "http_timeout",
    });
  });
});
