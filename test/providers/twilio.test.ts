import twilioLibrary from "twilio";
import { describe, expect, it } from "vitest";
import { twilio } from "../../src/providers/twilio";
import {
  adapterContract,
  expectAccepted,
  expectRejectedAndNothingWritten,
  type SignedRequest,
  secretValue,
  storedReceipt,
  uniqueKey,
  withHeader,
} from "./support/contract";
import { sha256Hex } from "./support/signers";

// Twilio's own helper library computes every signature here (it runs inside workerd with nodejs_compat).
const { getExpectedTwilioSignature } = twilioLibrary;
const URL_LIVE = "https://receiver.test/webhooks/pv-twilio";

const statusCallback = (messageSid: string) => ({
  AccountSid: "AC0000",
  MessageSid: messageSid,
  MessageStatus: "delivered",
  From: "+15005550006",
  To: "+14155552671",
  Body: "hi & bye = ok",
});

function formRequest(
  authToken: string,
  url: string,
  params: Record<string, string>,
  idempotencyToken?: string,
): SignedRequest {
  return {
    url,
    body: new URLSearchParams(params).toString(),
    headers: {
      "x-twilio-signature": getExpectedTwilioSignature(authToken, url, params),
      "content-type": "application/x-www-form-urlencoded",
      ...(idempotencyToken ? { "i-twilio-idempotency-token": idempotencyToken } : {}),
    },
  };
}

adapterContract({
  name: "twilio",
  sign: ({ secret, eventKey, source }) =>
    formRequest(secret, `https://receiver.test/webhooks/${source}`, statusCallback(`SM${eventKey}`), eventKey),
  expected: ({ eventKey }) => ({
    eventKey,
    eventType: "delivered",
    subjectId: `SM${eventKey}`,
    kept: { "i-twilio-idempotency-token": eventKey },
  }),
  signatureHeaders: ["x-twilio-signature"],
  malformEncoding: (request) => withHeader(request, "x-twilio-signature", "abc"),
  junkSignature: (request) => withHeader(request, "x-twilio-signature", "sha1=*** ,,"),
  timestamped: false,
});

describe("twilio: scheme specifics", () => {
  it("Twilio's documented example (auth token 12345, mycompany.com/myapp.php) verifies (adapter: the URL is Twilio's)", async () => {
    const params = {
      CallSid: "CA1234567890ABCDE",
      Caller: "+14158675309",
      Digits: "1234",
      From: "+14158675309",
      To: "+18005551212",
    };
    const verifyWith = (signature: string) =>
      twilio.verify({
        rawBody: new TextEncoder().encode(new URLSearchParams(params).toString()),
        headers: new Headers({ "x-twilio-signature": signature }),
        url: "https://mycompany.com/myapp.php?foo=1&bar=2",
        secrets: [{ name: "TWILIO_AUTH_TOKEN", value: "12345" }],
        now: Date.now(),
        options: {},
      });
    expect(await verifyWith("RSOYDt4T1cUTdK1PDd93/VVr8B8=")).toMatchObject({
      kind: "event",
      identity: { subjectId: "CA1234567890ABCDE" },
    });
    expect(await verifyWith("SSOYDt4T1cUTdK1PDd93/VVr8B8=")).toEqual({
      kind: "rejected",
      reason: "signature-mismatch",
    });
  });

  it("JSON bodies: the bodySHA256 variant verifies, and a changed body under the same URL is refused", async () => {
    const eventKey = uniqueKey("tw_json");
    const body = JSON.stringify({
      type: "com.twilio.messaging.message.delivered",
      data: { messageSid: `SM${eventKey}` },
    });
    const url = `${URL_LIVE}?bodySHA256=${sha256Hex(body)}`;
    const headers = {
      "x-twilio-signature": getExpectedTwilioSignature(secretValue("twilio", "CURRENT"), url, {}),
      "content-type": "application/json",
      "i-twilio-idempotency-token": eventKey,
    };
    const receiptId = await expectAccepted("pv-twilio", { url, body, headers });
    expect((await storedReceipt("pv-twilio", receiptId)).eventKey).toBe(eventKey);
    await expectRejectedAndNothingWritten("pv-twilio", { url, body: body.replace("delivered", "deliverer"), headers });
  });

  it("a Webhooks Rule's HMAC-SHA256 signature (X-Twilio-Webhooks-Signature-Settings) verifies with the shared key", async () => {
    const eventKey = uniqueKey("tw_sha256");
    const params = statusCallback(`SM${eventKey}`);
    const signature = getExpectedTwilioSignature(secretValue("twilio", "CURRENT"), URL_LIVE, params, "HMAC_SHA256");
    await expectAccepted("pv-twilio", {
      url: URL_LIVE,
      body: new URLSearchParams(params).toString(),
      headers: {
        "x-twilio-signature": signature,
        "x-twilio-webhooks-signature-settings": "key=webhooks_sharedkey_1,algorithm=HMAC_SHA256",
        "content-type": "application/x-www-form-urlencoded",
      },
    });
  });

  it("repeated form parameters are signed the way Twilio's library signs them", async () => {
    const eventKey = uniqueKey("tw_repeat");
    const params = { MessageSid: `SM${eventKey}`, MediaUrl: ["https://b.example/2", "https://a.example/1"] };
    const body = `MessageSid=SM${eventKey}&MediaUrl=${encodeURIComponent("https://b.example/2")}&MediaUrl=${encodeURIComponent("https://a.example/1")}`;
    await expectAccepted("pv-twilio", {
      url: URL_LIVE,
      body,
      headers: {
        "x-twilio-signature": getExpectedTwilioSignature(secretValue("twilio", "CURRENT"), URL_LIVE, params),
        "content-type": "application/x-www-form-urlencoded",
      },
    });
  });

  it("a signature over the URL with its default port spelled out (:443) verifies, as Twilio's library allows", async () => {
    const eventKey = uniqueKey("tw_port");
    const params = statusCallback(`SM${eventKey}`);
    const signature = getExpectedTwilioSignature(
      secretValue("twilio", "CURRENT"),
      "https://receiver.test:443/webhooks/pv-twilio",
      params,
    );
    await expectAccepted("pv-twilio", {
      url: URL_LIVE,
      body: new URLSearchParams(params).toString(),
      headers: { "x-twilio-signature": signature, "content-type": "application/x-www-form-urlencoded" },
    });
    const otherPort = getExpectedTwilioSignature(
      secretValue("twilio", "CURRENT"),
      "https://receiver.test:8443/webhooks/pv-twilio",
      params,
    );
    await expectRejectedAndNothingWritten("pv-twilio", {
      url: URL_LIVE,
      body: new URLSearchParams(params).toString(),
      headers: { "x-twilio-signature": otherPort, "content-type": "application/x-www-form-urlencoded" },
    });
  });

  it("without I-Twilio-Idempotency-Token the key is the payload hash, and says so", async () => {
    const params = statusCallback(`SM${uniqueKey("tw_nokey")}`);
    const request = formRequest(secretValue("twilio", "CURRENT"), URL_LIVE, params);
    const receiptId = await expectAccepted("pv-twilio", request);
    expect((await storedReceipt("pv-twilio", receiptId)).eventKey).toBe(sha256Hex(request.body as string));
  });
});
