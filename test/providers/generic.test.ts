import { describe, expect, it } from "vitest";
import { adapterFor, knownProviderNames } from "../../src/providers/registry";
import type { SourceOptions } from "../../src/providers/types";
import { parseSources, SourceConfigError } from "../../src/sources/config";
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
import { ed25519Sign, hmac } from "./support/signers";

/**
 * pv-generic: HMAC-SHA512, base64, "v1=" prefix, space-separated list, `{id}.{timestamp}.{body}`, key from x-acme-id,
 * secret given base64. pv-generic-ed25519: Ed25519 hex over `{timestamp}:{body}` (ms), key at JSON path.
 */
const acmeBody = (eventKey: string) =>
  JSON.stringify({ kind: "order.shipped", object: { id: `ord_${eventKey}`, revision: 7 } });

adapterContract({
  name: "generic",
  sign({ secret, eventKey, timestamp }) {
    const body = acmeBody(eventKey);
    const signature = hmac("sha512", Buffer.from(secret, "base64"), `${eventKey}.${timestamp}.`, body).toString(
      "base64",
    );
    return {
      body,
      headers: { "x-acme-signature": `v1=${signature}`, "x-acme-id": eventKey, "x-acme-timestamp": String(timestamp) },
    };
  },
  expected: ({ eventKey }) => ({ eventKey, eventType: "order.shipped", subjectId: `ord_${eventKey}`, version: 7 }),
  signatureHeaders: ["x-acme-signature", "x-acme-id", "x-acme-timestamp"],
  malformEncoding: (request) => withHeader(request, "x-acme-signature", "v1=abc"),
  junkSignature: (request) =>
    withHeader(request, "x-acme-signature", `v2=${header(request, "x-acme-signature").slice(3)} v1= v1=%%`),
  timestamped: true,
});

const relayBody = (eventKey: string) => JSON.stringify({ kind: "relay.ping", meta: { delivery_id: eventKey } });

adapterContract({
  name: "generic-ed25519",
  sign({ secretName, eventKey, timestamp }) {
    const body = relayBody(eventKey);
    const timestampMs = String(timestamp * 1000 + 5);
    return {
      body,
      headers: {
        "x-relay-signature": ed25519Sign(secretName, `${timestampMs}:`, body).toString("hex"),
        "x-relay-timestamp": timestampMs,
      },
    };
  },
  expected: ({ eventKey }) => ({ eventKey, eventType: "relay.ping" }),
  signatureHeaders: ["x-relay-signature", "x-relay-timestamp"],
  malformEncoding: (request) => withHeader(request, "x-relay-signature", "abc"),
  junkSignature: (request) => withHeader(request, "x-relay-signature", "zz"),
  timestamped: true,
});

describe("generic: configured entirely in wrangler.toml", () => {
  it("a signature list with one valid entry among others verifies", async () => {
    const eventKey = uniqueKey("generic_list");
    const timestamp = nowSeconds();
    const body = acmeBody(eventKey);
    const valid = hmac(
      "sha512",
      Buffer.from(secretValue("generic", "PREVIOUS"), "base64"),
      `${eventKey}.${timestamp}.`,
      body,
    ).toString("base64");
    const receiptId = await expectAccepted("pv-generic", {
      body,
      headers: {
        "x-acme-signature": `v1=${"A".repeat(88)} v1=${valid}`,
        "x-acme-id": eventKey,
        "x-acme-timestamp": String(timestamp),
      },
    });
    expect((await storedReceipt("pv-generic", receiptId)).eventKey).toBe(eventKey);
  });

  const parse = (options: Record<string, unknown>) =>
    parseSources(
      { probe: { secrets: ["X"], destination: "none", ...options } },
      {
        knownProviders: knownProviderNames(),
        knownHandlers: new Set(),
        validateProviderOptions: (provider: string, sourceOptions: SourceOptions) =>
          adapterFor(provider)?.validateOptions?.(sourceOptions) ?? [],
      },
    );
  const problemsOf = (options: Record<string, unknown>): string[] => {
    try {
      parse(options);
      return [];
    } catch (error) {
      if (error instanceof SourceConfigError) return error.problems;
      throw error;
    }
  };

  it("fails validation, loudly and specifically, for missing or wrong options", () => {
    expect(problemsOf({ provider: "generic" })).toContain("SOURCES.probe: generic provider needs signature_header");
    expect(problemsOf({ provider: "generic", signature_header: "x-sig", algorithm: "md5" })).toEqual([
      "SOURCES.probe: algorithm must be one of hmac-sha1, hmac-sha256, hmac-sha512, ed25519",
    ]);
    expect(problemsOf({ provider: "generic", signature_header: "x-sig", signed_content: "{id}.{body}" })).toEqual([
      "SOURCES.probe: signed_content uses {id} but id_header is not set",
    ]);
    expect(problemsOf({ provider: "generic", signature_header: "x-sig", signed_content: "{nonce}.{body}" })).toEqual([
      "SOURCES.probe: signed_content has unknown placeholder {nonce} (known: {body}, {timestamp}, {id}, {url})",
    ]);
    expect(
      problemsOf({
        provider: "generic",
        signature_header: "x-sig",
        signed_content: "{timestamp}",
        timestamp_header: "x-ts",
      }),
    ).toEqual(["SOURCES.probe: signed_content must include {body}"]);
    expect(problemsOf({ provider: "generic", signature_header: "x-sig", encoding: "base32" })).toEqual([
      "SOURCES.probe: encoding must be one of hex, base64, base64url",
    ]);
    expect(problemsOf({ provider: "generic", signature_header: "x-sig" })).toEqual([]);
  });

  it("refuses option sets that defeat replay protection: a timestamp the signature leaves out, a key header it does not sign", () => {
    // The tolerance would check a time the sender never signed: anyone could refresh it on a captured delivery.
    expect(problemsOf({ provider: "generic", signature_header: "x-sig", timestamp_header: "x-ts" })).toEqual([
      "SOURCES.probe: timestamp_header is set but signed_content does not include {timestamp}: an unsigned time bounds no replay",
    ]);
    // A dedupe key from a header the signature does not cover: a captured delivery under a new value is a new key.
    const unsignedKey =
      "SOURCES.probe: event_key_header must be the id_header that signed_content signs as {id} (an unsigned key header lets a replay pass as a new event); or use event_key_path";
    expect(problemsOf({ provider: "generic", signature_header: "x-sig", event_key_header: "x-delivery" })).toEqual([
      unsignedKey,
    ]);
    expect(
      problemsOf({
        provider: "generic",
        signature_header: "x-sig",
        id_header: "x-delivery",
        event_key_header: "x-delivery",
      }),
    ).toEqual([unsignedKey]);
    expect(
      problemsOf({
        provider: "generic",
        signature_header: "x-sig",
        signed_content: "{id}.{body}",
        id_header: "x-other",
        event_key_header: "x-delivery",
      }),
    ).toEqual([unsignedKey]);
    // Signed as {id} (header names are case-insensitive), or a key inside the signed body: fine.
    expect(
      problemsOf({
        provider: "generic",
        signature_header: "x-sig",
        signed_content: "{id}.{timestamp}.{body}",
        id_header: "X-Delivery",
        timestamp_header: "x-ts",
        event_key_header: "x-delivery",
      }),
    ).toEqual([]);
    expect(problemsOf({ provider: "generic", signature_header: "x-sig", event_key_path: "meta.id" })).toEqual([]);
  });

  it("unsupported provider names and bad adapter options fail validation instead of accepting traffic", () => {
    expect(problemsOf({ provider: "stripe-ish" })).toEqual(['SOURCES.probe: unsupported provider "stripe-ish"']);
    expect(problemsOf({ provider: "square", notification_url: "hooks.example.com" })).toEqual([
      "SOURCES.probe: notification_url must be the http(s) URL registered with Square",
    ]);
    // Square signs URL ‖ body back to back: only a URL fixed by the configuration leaves no bytes to move between them.
    expect(problemsOf({ provider: "square" })).toEqual([
      "SOURCES.probe: notification_url is required: the http(s) URL registered with Square, exactly as registered",
    ]);
    expect(problemsOf({ provider: "square", notification_url: "https://hooks.example.com/square?a=1" })).toEqual([]);
    expect(problemsOf({ provider: "twilio", public_origin: "hooks.example.com/path" })).toEqual([
      'SOURCES.probe: public_origin must be an origin like "https://hooks.example.com"',
    ]);
    expect(problemsOf({ provider: "twilio", public_origin: "https://hooks.example.com" })).toEqual([]);
    for (const provider of [
      "stripe",
      "github",
      "shopify",
      "slack",
      "standard-webhooks",
      "svix",
      "twilio",
      "paddle",
      "linear",
      "twitch",
      "zoom",
      "gitlab",
      "intercom",
      "mailgun",
      "sendgrid",
      "ed25519",
      "discord",
    ]) {
      expect(problemsOf({ provider }), provider).toEqual([]);
    }
  });
});
