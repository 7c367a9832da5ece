import twilioLibrary from "twilio";
import { describe, expect, it } from "vitest";
import { portSpellings, twilio } from "../../src/providers/twilio";
import {
  expectAccepted,
  expectRejectedAndNothingWritten,
  secretValue,
  send,
  storedReceipt,
  uniqueKey,
} from "./support/contract";

/**
 * The URL forms Twilio may have signed, each signed by Twilio's own library (getExpectedTwilioSignature): a
 * `public_url` behind a path-rewriting proxy, an explicit port (twilio-node tries the URL with the port removed
 * and with the default port added), and user info.
 */
const { getExpectedTwilioSignature } = twilioLibrary;
const params = (sid: string) => ({ AccountSid: "AC0000", CallSid: sid, CallStatus: "ringing", From: "+14158675309" });
const formOf = (values: Record<string, string>) => new URLSearchParams(values).toString();

function signedFor(signedUrl: string, values: Record<string, string>, headers: Record<string, string> = {}) {
  return {
    body: formOf(values),
    headers: {
      "x-twilio-signature": getExpectedTwilioSignature(secretValue("twilio", "CURRENT"), signedUrl, values),
      "content-type": "application/x-www-form-urlencoded",
      ...headers,
    },
  };
}

describe("twilio: the URL Twilio signed", () => {
  it("public_url: the configured URL (proxy path and query) verifies, with its explicit port or without it", async () => {
    for (const signedUrl of [
      "https://hooks.example.com:8443/twilio/sms?tenant=7",
      "https://hooks.example.com/twilio/sms?tenant=7",
    ]) {
      const sid = `CA${uniqueKey("tw_proxy")}`;
      const receiptId = await expectAccepted("pv-twilio-proxied", signedFor(signedUrl, params(sid)));
      expect((await storedReceipt("pv-twilio-proxied", receiptId)).subjectId).toBe(sid);
    }
    // The path the Worker saw is not what Twilio signed; nor is another port.
    await expectRejectedAndNothingWritten(
      "pv-twilio-proxied",
      signedFor("https://receiver.test/webhooks/pv-twilio-proxied", params("CA1")),
    );
    await expectRejectedAndNothingWritten(
      "pv-twilio-proxied",
      signedFor("https://hooks.example.com:443/twilio/sms?tenant=7", params("CA2")),
    );
  });

  it("public_url with a character WHATWG encodes (') verifies when Twilio signed its normalized form, as twilio-node accepts", async () => {
    const configured = "https://hooks.example.com/twilio/sms?tenant=o'neil&note=x";
    const normalized = new URL(configured).toString();
    expect(normalized).toBe("https://hooks.example.com/twilio/sms?tenant=o%27neil&note=x");
    for (const signedUrl of [normalized, configured]) {
      const sid = `CA${uniqueKey("tw_quoted")}`;
      const request = signedFor(signedUrl, params(sid));
      // Twilio's own validator, given the URL as configured, accepts this signature: so must the receiver.
      expect(
        twilioLibrary.validateRequest(
          secretValue("twilio", "CURRENT"),
          request.headers["x-twilio-signature"],
          configured,
          params(sid),
        ),
      ).toBe(true);
      const receiptId = await expectAccepted("pv-twilio-quoted", request);
      expect((await storedReceipt("pv-twilio-quoted", receiptId)).subjectId).toBe(sid);
    }
    await expectRejectedAndNothingWritten(
      "pv-twilio-quoted",
      signedFor("https://hooks.example.com/twilio/sms?tenant=oneil&note=x", params("CA3")),
    );
  });

  it("twilio-node's explicit-port vector: https://mycompany.com:1234/… signed without the port verifies (adapter)", async () => {
    const values = {
      CallSid: "CA1234567890ABCDE",
      Caller: "+14158675309",
      Digits: "1234",
      From: "+14158675309",
      To: "+18005551212",
    };
    const verify = (url: string, signature: string) =>
      twilio.verify({
        rawBody: new TextEncoder().encode(formOf(values)),
        headers: new Headers({ "x-twilio-signature": signature }),
        url,
        secrets: [{ name: "TWILIO_AUTH_TOKEN", value: "12345" }],
        now: Date.now(),
        options: {},
      });
    const withoutPort = getExpectedTwilioSignature("12345", "https://mycompany.com/myapp.php?foo=1&bar=2", values);
    expect(await verify("https://mycompany.com:1234/myapp.php?foo=1&bar=2", withoutPort)).toMatchObject({
      kind: "event",
    });
    const withPort = getExpectedTwilioSignature("12345", "https://mycompany.com:1234/myapp.php?foo=1&bar=2", values);
    expect(await verify("https://mycompany.com:1234/myapp.php?foo=1&bar=2", withPort)).toMatchObject({ kind: "event" });
    const otherPort = getExpectedTwilioSignature("12345", "https://mycompany.com:4321/myapp.php?foo=1&bar=2", values);
    expect(await verify("https://mycompany.com:1234/myapp.php?foo=1&bar=2", otherPort)).toEqual({
      kind: "rejected",
      reason: "signature-mismatch",
    });
  });

  it("the port spellings follow twilio-node's removePort/addPort, user info and IPv6 included", () => {
    expect(portSpellings("https://mycompany.com:1234/a")).toEqual([
      "https://mycompany.com/a",
      "https://mycompany.com:1234/a",
    ]);
    expect(portSpellings("https://user:pass@mycompany.com/a")).toEqual([
      "https://user:pass@mycompany.com/a",
      "https://user:pass@mycompany.com:443/a",
    ]);
    expect(portSpellings("http://[::1]:8080/a")).toEqual(["http://[::1]/a", "http://[::1]:8080/a"]);
  });

  it("user info in public_url: a signature over the URL with :443 added verifies, as does the one without", async () => {
    for (const signedUrl of [
      "https://user:pass@hooks.example.com:443/twilio/voice",
      "https://user:pass@hooks.example.com/twilio/voice",
    ]) {
      await expectAccepted("pv-twilio-userinfo", signedFor(signedUrl, params(`CA${uniqueKey("tw_userinfo")}`)));
    }
    await expectRejectedAndNothingWritten(
      "pv-twilio-userinfo",
      signedFor("https://hooks.example.com/twilio/voice", params("CA3")),
    );
  });

  it("user info without public_url: Twilio's Basic credentials are put back into the URL it signed", async () => {
    const basic = `Basic ${btoa("user:pass")}`;
    await expectAccepted(
      "pv-twilio",
      signedFor("https://user:pass@receiver.test/webhooks/pv-twilio", params(`CA${uniqueKey("tw_basic")}`), {
        authorization: basic,
      }),
    );
    await expectRejectedAndNothingWritten(
      "pv-twilio",
      signedFor("https://user:pass@receiver.test/webhooks/pv-twilio", params(`CA${uniqueKey("tw_basic_other")}`), {
        authorization: `Basic ${btoa("user:other")}`,
      }),
    );
  });

  it("an accepted form delivery is answered with empty TwiML (text/xml); the receipt rides in headers", async () => {
    const response = await send(
      "pv-twilio",
      signedFor("https://receiver.test/webhooks/pv-twilio", params(`CA${uniqueKey("tw_twiml")}`)),
    );
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toMatch(/^text\/xml/);
    expect(await response.text()).toBe('<?xml version="1.0" encoding="UTF-8"?><Response></Response>');
    expect(response.headers.get("x-webhook-disposition")).toBe("accepted");
  });
});
