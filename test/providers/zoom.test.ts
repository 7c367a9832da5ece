import { describe, expect, it } from "vitest";
import {
  adapterContract,
  expectRejectedAndNothingWritten,
  header,
  nowSeconds,
  secretValue,
  send,
  storedCounts,
  uniqueKey,
  withHeader,
} from "./support/contract";
import { hmac, sha256Hex } from "./support/signers";

// Zoom publishes no signer; node:crypto signs with the documented recipe `v0:${timestamp}:${body}`.
function signZoom(secret: string, body: string, timestamp: number) {
  return {
    body,
    headers: {
      "x-zm-signature": `v0=${hmac("sha256", secret, `v0:${timestamp}:`, body).toString("hex")}`,
      "x-zm-request-timestamp": String(timestamp),
      "content-type": "application/json",
    },
  };
}

const meetingStarted = (marker: string) =>
  JSON.stringify({
    event: "meeting.started",
    event_ts: 1_700_000_000_123,
    payload: { account_id: "A1", object: { id: `m-${marker}` } },
  });

adapterContract({
  name: "zoom",
  sign: ({ secret, eventKey, timestamp }) => signZoom(secret, meetingStarted(eventKey), timestamp),
  // Zoom sends no event id: the key is the payload hash, and says so.
  expected: (_args, request) => ({
    eventKey: sha256Hex(request.body as string),
    eventType: "meeting.started",
    subjectId: `m-${_args.eventKey}`,
    occurredAt: 1_700_000_000_123,
    kept: { "event-key-origin": "payload-sha256" },
  }),
  signatureHeaders: ["x-zm-signature", "x-zm-request-timestamp"],
  malformEncoding: (request) => withHeader(request, "x-zm-signature", "v0=12345"),
  junkSignature: (request) => withHeader(request, "x-zm-signature", `v1=${header(request, "x-zm-signature").slice(3)}`),
  timestamped: true,
});

describe("zoom: endpoint.url_validation", () => {
  it("answers a verified validation with the plain token and its HMAC under the secret, and claims nothing", async () => {
    const plainToken = uniqueKey("plain");
    const secret = secretValue("zoom", "PREVIOUS");
    const body = JSON.stringify({ payload: { plainToken }, event_ts: Date.now(), event: "endpoint.url_validation" });
    const before = await storedCounts("pv-zoom");
    const response = await send("pv-zoom", signZoom(secret, body, nowSeconds()));
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({
      plainToken,
      encryptedToken: hmac("sha256", secret, plainToken).toString("hex"),
    });
    expect(await storedCounts("pv-zoom")).toEqual(before);
  });

  it("an unsigned validation request is refused, not answered", async () => {
    const body = JSON.stringify({
      payload: { plainToken: "abc" },
      event_ts: Date.now(),
      event: "endpoint.url_validation",
    });
    await expectRejectedAndNothingWritten("pv-zoom", { body, headers: { "content-type": "application/json" } });
  });
});
