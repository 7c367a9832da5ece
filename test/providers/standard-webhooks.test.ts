import { Webhook as StandardWebhook } from "standardwebhooks";
import { Webhook as SvixWebhook } from "svix";
import { describe, expect, it } from "vitest";
import { standardWebhooks } from "../../src/providers/standard-webhooks";
import {
  adapterContract,
  expectAccepted,
  header,
  nowSeconds,
  secretValue,
  storedReceipt,
  uniqueKey,
  withHeader,
} from "./support/contract";
import { ed25519Sign } from "./support/signers";

const payload = (eventKey: string) =>
  JSON.stringify({ type: "invoice.paid", timestamp: "2026-11-30T08:00:00Z", data: { marker: eventKey } });

// v1 (symmetric): the standardwebhooks library signs.
adapterContract({
  name: "standard",
  sign({ secret, eventKey, timestamp }) {
    const body = payload(eventKey);
    return {
      body,
      headers: {
        "webhook-id": eventKey,
        "webhook-timestamp": String(timestamp),
        "webhook-signature": new StandardWebhook(secret).sign(eventKey, new Date(timestamp * 1000), body),
      },
    };
  },
  expected: ({ eventKey }) => ({ eventKey, eventType: "invoice.paid", occurredAt: Date.parse("2026-11-30T08:00:00Z") }),
  signatureHeaders: ["webhook-signature", "webhook-id", "webhook-timestamp"],
  malformEncoding: (request) => withHeader(request, "webhook-signature", "v1,abc"),
  junkSignature: (request) => withHeader(request, "webhook-signature", "v1, v2,abc , ,,, v1a,@@@"),
  timestamped: true,
});

// v1a (asymmetric): Ed25519 over the same content; the sources list the sender's whpk_ public keys (provider "svix").
adapterContract({
  name: "standard-v1a",
  sign({ secretName, eventKey, timestamp }) {
    const body = payload(eventKey);
    const signature = ed25519Sign(secretName, `${eventKey}.${timestamp}.`, body).toString("base64");
    return {
      body,
      headers: { "svix-id": eventKey, "svix-timestamp": String(timestamp), "svix-signature": `v1a,${signature}` },
    };
  },
  expected: ({ eventKey }) => ({ eventKey, eventType: "invoice.paid" }),
  signatureHeaders: ["svix-signature", "svix-id", "svix-timestamp"],
  malformEncoding: (request) =>
    withHeader(request, "svix-signature", `v1a,${header(request, "svix-signature").slice(4, -3)}`),
  junkSignature: (request) =>
    withHeader(request, "svix-signature", `v1,${header(request, "svix-signature").slice(4)} v1a,`),
  timestamped: true,
});

describe("standard webhooks: compatibility", () => {
  it("the specification's example (whsec_MfKQ9r8G…, msg_p5jXN8AQ…, 1614265330) verifies at its time, not 6 minutes later", async () => {
    const verifyAt = (nowSeconds: number) =>
      standardWebhooks.verify({
        rawBody: new TextEncoder().encode('{"test": 2432232314}'),
        headers: new Headers({
          "webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
          "webhook-timestamp": "1614265330",
          "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
        }),
        url: "https://receiver.test/webhooks/x",
        secrets: [{ name: "S", value: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" }],
        now: nowSeconds * 1000,
        options: {},
      });
    expect(await verifyAt(1614265330)).toMatchObject({
      kind: "event",
      identity: { eventKey: "msg_p5jXN8AQM9LWM0D4loKWxJek" },
    });
    expect(await verifyAt(1614265330 + 360)).toEqual({ kind: "rejected", reason: "timestamp-out-of-tolerance" });
  });

  it("svix's own library signs under svix-* headers and the route verifies", async () => {
    const eventKey = uniqueKey("svix_lib");
    const timestamp = nowSeconds();
    const body = payload(eventKey);
    const signature = new SvixWebhook(secretValue("standard", "CURRENT")).sign(
      eventKey,
      new Date(timestamp * 1000),
      body,
    );
    const receiptId = await expectAccepted("pv-standard", {
      body,
      headers: { "svix-id": eventKey, "svix-timestamp": String(timestamp), "svix-signature": signature },
    });
    expect((await storedReceipt("pv-standard", receiptId)).eventKey).toBe(eventKey);
  });

  it("a rotating sender's header lists several signatures; one from a listed secret is enough", async () => {
    const eventKey = uniqueKey("sw_roll");
    const timestamp = nowSeconds();
    const body = payload(eventKey);
    const at = new Date(timestamp * 1000);
    const signatures = [
      new StandardWebhook(secretValue("standard", "UNLISTED")).sign(eventKey, at, body),
      new StandardWebhook(secretValue("standard", "PREVIOUS")).sign(eventKey, at, body),
    ].join(" ");
    await expectAccepted("pv-standard", {
      body,
      headers: { "webhook-id": eventKey, "webhook-timestamp": String(timestamp), "webhook-signature": signatures },
    });
  });

  it("a v1a signature never verifies against a symmetric secret, nor v1 against a public key", async () => {
    const eventKey = uniqueKey("sw_cross");
    const timestamp = 1_700_000_000;
    const body = payload(eventKey);
    const verify = (signature: string, secret: string) =>
      standardWebhooks.verify({
        rawBody: new TextEncoder().encode(body),
        headers: new Headers({
          "webhook-id": eventKey,
          "webhook-timestamp": String(timestamp),
          "webhook-signature": signature,
        }),
        url: "https://receiver.test/webhooks/x",
        secrets: [{ name: "S", value: secret }],
        now: timestamp * 1000,
        options: {},
      });
    const v1 = new StandardWebhook(secretValue("standard", "CURRENT")).sign(eventKey, new Date(timestamp * 1000), body);
    const v1a = `v1a,${ed25519Sign("PV_STANDARD_V1A_CURRENT", `${eventKey}.${timestamp}.`, body).toString("base64")}`;
    expect((await verify(v1, secretValue("standard", "CURRENT"))).kind).toBe("event");
    expect((await verify(v1a, secretValue("standard-v1a", "CURRENT"))).kind).toBe("event");
    expect(await verify(`v1,${v1a.slice(4)}`, secretValue("standard", "CURRENT"))).toEqual({
      kind: "rejected",
      reason: "signature-mismatch",
    });
    expect(await verify(`v1a,${v1.slice(3)}`, secretValue("standard-v1a", "CURRENT"))).toEqual({
      kind: "rejected",
      reason: "signature-mismatch",
    });
  });
});
