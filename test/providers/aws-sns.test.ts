import { env } from "cloudflare:workers";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { awsSns } from "../../src/providers/aws-sns";
import { pinnedSnsUrl, type SnsMessage, snsStringToSign } from "../../src/providers/aws-sns-message";
import { MAX_FETCHES_IN_FLIGHT, MAX_LOADS_PER_WINDOW } from "../../src/providers/key-cache";
import { redirectKeyFetchesForTests } from "../../src/providers/key-fetch";
import { SubjectAlternativeNameExtension, X509CertificateGenerator } from "../../src/providers/x509";
import {
  claimAnswer,
  expectAccepted,
  expectRejectedAndNothingWritten,
  send,
  storedCounts,
  storedReceipt,
  uniqueKey,
} from "./support/contract";
import { keyStandinOrigin } from "./support/key-standin";

/**
 * AWS SNS through the real route, against the key stand-in (test/setup/global/key-standin.ts): messages are
 * signed with a self-made RSA key whose self-signed certificate the stand-in serves at a pinned
 * `https://sns.<region>.amazonaws.com/….pem` URL; the receiver's fetches of pinned URLs are sent there.
 */

const SOURCE = "pv-aws-sns";
/**
 * The two tests that send 70 requests each, one after another (the first proves each one wrote nothing): generous on
 * purpose. With two test files running at once at a load average of 20, the 70 rejections took over 30 s (vitest's
 * testTimeout here) while every assertion held. They hold what was fetched and stored, never how fast.
 */
const SEVENTY_REQUESTS_MS = 240_000;
const TOPIC = "arn:aws:sns:us-east-1:123456789012:receiver-orders";
const standin = keyStandinOrigin;
const run = uniqueKey("sns");
const certPath = `/SimpleNotificationService-${run}.pem`;
const certUrl = `https://sns.us-east-1.amazonaws.com${certPath}`;

interface Signer {
  sha1: CryptoKey;
  sha256: CryptoKey;
  certificatePem: string;
}

/** A self-signed certificate issued to `name` (and these DNS alternative names): AWS's is issued to sns.amazonaws.com. */
async function makeSigner(name = "CN=sns.amazonaws.com", alternativeNames: string[] = []): Promise<Signer> {
  const algorithm = {
    name: "RSASSA-PKCS1-v1_5",
    hash: "SHA-256",
    publicExponent: new Uint8Array([1, 0, 1]),
    modulusLength: 2048,
  };
  const keys = (await crypto.subtle.generateKey(algorithm, true, ["sign", "verify"])) as CryptoKeyPair;
  const certificate = await X509CertificateGenerator.createSelfSigned(
    {
      serialNumber: "01",
      name,
      extensions:
        alternativeNames.length > 0
          ? [new SubjectAlternativeNameExtension(alternativeNames.map((value) => ({ type: "dns" as const, value })))]
          : [],
      notBefore: new Date(Date.now() - 86_400_000),
      notAfter: new Date(Date.now() + 86_400_000),
      keys,
      signingAlgorithm: algorithm,
    },
    crypto,
  );
  const pkcs8 = (await crypto.subtle.exportKey("pkcs8", keys.privateKey)) as ArrayBuffer;
  const sha1 = await crypto.subtle.importKey("pkcs8", pkcs8, { name: "RSASSA-PKCS1-v1_5", hash: "SHA-1" }, false, [
    "sign",
  ]);
  return { sha1, sha256: keys.privateKey, certificatePem: certificate.toString("pem") };
}

let signer: Signer;
let stranger: Signer;

async function serve(path: string, text: string) {
  const response = await fetch(`${standin()}/__serve${path}`, { method: "PUT", body: text });
  expect(response.status).toBe(204);
}

async function fetchesOf(pathAndQuery: string): Promise<number> {
  return Number(await (await fetch(`${standin()}/__fetches?path=${encodeURIComponent(pathAndQuery)}`)).text());
}

/**
 * Two RSA-2048 key pairs are generated before the first test: a prime search whose time varies, and at a load
 * average of 36 this hook outlasted vitest's 10 s hookTimeout (every test of the file was then skipped).
 */
const SIGNERS_MS = 120_000;

beforeAll(async () => {
  redirectKeyFetchesForTests(env, standin());
  signer = await makeSigner();
  stranger = await makeSigner();
  await serve(certPath, signer.certificatePem);
}, SIGNERS_MS);
afterAll(() => redirectKeyFetchesForTests(env, null));
afterEach(() => {
  vi.useRealTimers();
});

type Unsigned = Omit<SnsMessage, "Signature" | "SignatureVersion" | "SigningCertURL"> &
  Partial<Pick<SnsMessage, "SigningCertURL">>;

async function signed(message: Unsigned, version: "1" | "2" = "1", by: Signer = signer): Promise<string> {
  const full = { SigningCertURL: certUrl, ...message, SignatureVersion: version, Signature: "" } as SnsMessage;
  const bytes = new TextEncoder().encode(snsStringToSign(full));
  const signature = await crypto.subtle.sign("RSASSA-PKCS1-v1_5", version === "1" ? by.sha1 : by.sha256, bytes);
  return JSON.stringify({ ...full, Signature: btoa(String.fromCharCode(...new Uint8Array(signature))) });
}

function notification(overrides: Partial<Unsigned> = {}): Unsigned {
  return {
    Type: "Notification",
    MessageId: crypto.randomUUID(),
    TopicArn: TOPIC,
    Subject: "order placed",
    Message: JSON.stringify({ order: uniqueKey("order") }),
    Timestamp: new Date().toISOString(),
    ...overrides,
  };
}

const request = (body: string) => ({
  body,
  headers: { "content-type": "text/plain; charset=UTF-8", "x-amz-sns-message-type": JSON.parse(body).Type },
});

describe("aws-sns: signature against the fetched certificate", () => {
  it("accepts SignatureVersion 1 (SHA1withRSA) and 2 (SHA256withRSA), keyed on MessageId; a retry is a duplicate", async () => {
    for (const version of ["1", "2"] as const) {
      const message = notification();
      const body = await signed(message, version);
      const receiptId = await expectAccepted(SOURCE, request(body));
      expect(await storedReceipt(SOURCE, receiptId)).toMatchObject({
        eventKey: message.MessageId,
        eventType: "Notification",
        subjectId: TOPIC,
        occurredAt: Date.parse(message.Timestamp),
      });
      const retry = await claimAnswer(await send(SOURCE, request(body)));
      expect(retry).toEqual({ status: "duplicate", receipt: receiptId });
    }
  });

  it("signs a notification without a Subject over the fields it has", async () => {
    const { Subject: _none, ...withoutSubject } = notification();
    await expectAccepted(SOURCE, request(await signed(withoutSubject, "2")));
  });

  it("fetches the certificate once per isolate", async () => {
    const path = `/SimpleNotificationService-${run}-cache.pem`;
    await serve(path, signer.certificatePem);
    for (let i = 0; i < 3; i++) {
      await expectAccepted(
        SOURCE,
        request(await signed(notification({ SigningCertURL: `https://sns.us-east-1.amazonaws.com${path}` }))),
      );
    }
    expect(await fetchesOf(path)).toBe(1);
  });

  it("refuses a tampered message, another key's signature, a topic the source does not list, or a version it does not know", async () => {
    const body = await signed(notification());
    await expectRejectedAndNothingWritten(SOURCE, request(body.replace("order placed", "order plaaced")));
    await expectRejectedAndNothingWritten(SOURCE, request(await signed(notification(), "1", stranger)));
    await expectRejectedAndNothingWritten(
      SOURCE,
      request(await signed(notification({ TopicArn: "arn:aws:sns:us-east-1:999999999999:theirs" }))),
    );
    const parsed = JSON.parse(await signed(notification(), "2"));
    await expectRejectedAndNothingWritten(SOURCE, request(JSON.stringify({ ...parsed, SignatureVersion: "3" })));
    await expectRejectedAndNothingWritten(SOURCE, request(JSON.stringify({ ...parsed, Signature: undefined })));
  });

  it("never fetches a certificate from a host outside sns.<region>.amazonaws.com", async () => {
    const offPin = [
      `https://sns.us-east-1.amazonaws.com.attacker.test${certPath}`,
      `https://attacker.test${certPath}`,
      `http://sns.us-east-1.amazonaws.com${certPath}-http.pem`,
      `https://sns.us-east-1.amazonaws.com:8443${certPath}-port.pem`,
      `https://user@sns.us-east-1.amazonaws.com${certPath}-user.pem`,
      `https://sns.us-east-1.amazonaws.com/${run}-not-a-pem`,
      // S3 virtual hosts: buckets named `sns`, which anyone can create and serve a certificate from.
      `https://sns.s3.amazonaws.com${certPath}-s3.pem`,
      `https://sns.s3-us-west-2.amazonaws.com${certPath}-s3-region.pem`,
      `https://sns.amazonaws.com${certPath}-no-region.pem`,
      `https://sns.us-east-1.amazonaws.com.cn${certPath}-wrong-partition.pem`,
    ];
    for (const url of offPin) {
      const fetchedBefore = await fetchesOf(new URL(url).pathname);
      await expectRejectedAndNothingWritten(SOURCE, request(await signed(notification({ SigningCertURL: url }))));
      expect(await fetchesOf(new URL(url).pathname)).toBe(fetchedBefore);
    }
  });

  it("answers 503 while the certificate cannot be fetched (a failing host, a timeout), and 401 when the host has no such certificate", async () => {
    for (const path of [`/status-503/${run}.pem`, `/hang/${run}.pem`]) {
      const before = await storedCounts(SOURCE);
      const answer = await send(
        SOURCE,
        request(await signed(notification({ SigningCertURL: `https://sns.us-east-1.amazonaws.com${path}` }))),
      );
      expect(answer.status).toBe(503);
      expect(answer.headers.get("retry-after")).toBe("5");
      expect(((await answer.json()) as { error: { code: string } }).error.code).toBe("verification_key_unavailable");
      expect(await storedCounts(SOURCE)).toEqual(before);
    }
    // An outage is not remembered: once the host answers, the same URL verifies.
    const recovered = `/status-503/${run}-recovered.pem`;
    const recoveredUrl = `https://sns.us-east-1.amazonaws.com${recovered}`;
    expect((await send(SOURCE, request(await signed(notification({ SigningCertURL: recoveredUrl }))))).status).toBe(
      503,
    );
    await serve(recovered, signer.certificatePem);
    await expectAccepted(SOURCE, request(await signed(notification({ SigningCertURL: recoveredUrl }))));
  });

  it("remembers a certificate the host does not have: repeating its URL costs one fetch", async () => {
    const missing = `/${run}-missing.pem`;
    const missingUrl = `https://sns.us-east-1.amazonaws.com${missing}`;
    for (let i = 0; i < 5; i++)
      await expectRejectedAndNothingWritten(
        SOURCE,
        request(await signed(notification({ SigningCertURL: missingUrl }))),
      );
    // Even once something answers there, the refusal holds for its few minutes without another fetch.
    await serve(missing, signer.certificatePem);
    await expectRejectedAndNothingWritten(SOURCE, request(await signed(notification({ SigningCertURL: missingUrl }))));
    expect(await fetchesOf(missing)).toBe(1);
  });

  it("refuses a certificate not issued to an SNS signing name, and accepts the names AWS uses", async () => {
    for (const [name, alternativeNames] of [
      ["CN=attacker.test", []],
      ["CN=sns.amazonaws.com.attacker.test", ["attacker.test"]],
      ["CN=sns.s3.amazonaws.com", []],
    ] as const) {
      const impostor = await makeSigner(name, [...alternativeNames]);
      const path = `/SimpleNotificationService-${uniqueKey("impostor")}.pem`;
      await serve(path, impostor.certificatePem);
      await expectRejectedAndNothingWritten(
        SOURCE,
        request(
          await signed(notification({ SigningCertURL: `https://sns.us-east-1.amazonaws.com${path}` }), "2", impostor),
        ),
      );
    }
    for (const [name, alternativeNames] of [
      ["CN=Amazon", ["sns.amazonaws.com"]],
      ["CN=sns-signing.me-south-1.amazonaws.com", []],
      ["CN=sns-us-gov-west-1.amazonaws.com", []],
    ] as const) {
      const issued = await makeSigner(name, [...alternativeNames]);
      const path = `/SimpleNotificationService-${uniqueKey("issued")}.pem`;
      await serve(path, issued.certificatePem);
      await expectAccepted(
        SOURCE,
        request(
          await signed(notification({ SigningCertURL: `https://sns.us-east-1.amazonaws.com${path}` }), "2", issued),
        ),
      );
    }
  });

  it(`fetches at most ${MAX_FETCHES_IN_FLIGHT} certificates at once per source: the rest are 503 without a fetch, and another source is not held up`, async () => {
    const hanging = Array.from({ length: MAX_FETCHES_IN_FLIGHT + 3 }, (_, i) => `/hang/${run}-flood-${i}.pem`);
    const flood = Promise.all(
      hanging.map(async (path) =>
        send(
          SOURCE,
          request(await signed(notification({ SigningCertURL: `https://sns.us-east-1.amazonaws.com${path}` }))),
        ),
      ),
    );
    // Another source naming a certificate this isolate has not fetched yet has its own allowance.
    const elsewhere = `/SimpleNotificationService-${run}-elsewhere.pem`;
    await serve(elsewhere, signer.certificatePem);
    await expectAccepted(
      "pv-aws-sns-v2",
      request(await signed(notification({ SigningCertURL: `https://sns.us-east-1.amazonaws.com${elsewhere}` }), "2")),
    );
    const answers = await flood;
    expect(answers.map((answer) => answer.status)).toEqual(hanging.map(() => 503));
    const fetched = await Promise.all(hanging.map((path) => fetchesOf(path)));
    expect(fetched.reduce((sum, count) => sum + count, 0)).toBe(MAX_FETCHES_IN_FLIGHT);
  });

  it("reads a SigningCertURL without its query or fragment: 70 variants of one URL cost no fetch of their own", {
    timeout: SEVENTY_REQUESTS_MS,
  }, async () => {
    await expectAccepted(SOURCE, request(await signed(notification())));
    const certificateFetches = await fetchesOf(certPath);
    for (let i = 0; i < 70; i++) {
      // A stranger's signature: the genuine certificate, however its URL is dressed, lets none of them in.
      const url = i % 2 === 0 ? `${certUrl}?v=${i}` : `${certUrl}#${i}`;
      await expectRejectedAndNothingWritten(
        SOURCE,
        request(await signed(notification({ SigningCertURL: url }), "1", stranger)),
      );
      if (i % 2 === 0) expect(await fetchesOf(`${certPath}?v=${i}`)).toBe(0);
    }
    expect(await fetchesOf(certPath)).toBe(certificateFetches);
    expect(pinnedSnsUrl(`${certUrl}?Action=x#y`, "certificate")?.href).toBe(certUrl);
  });

  it(`after 70 forged certificate URLs at most ${MAX_LOADS_PER_WINDOW} are fetched, and a certificate already verified still verifies`, {
    timeout: SEVENTY_REQUESTS_MS,
  }, async () => {
    // A source of its own: the flood spends its fetch allowance for the minute, and no other test's.
    const source = "pv-aws-sns-flood";
    // The clock pinned: the whole flood falls in one allowance window however slowly the machine runs it.
    vi.useFakeTimers({ toFake: ["Date"] });
    vi.setSystemTime(Date.now());
    await expectAccepted(source, request(await signed(notification())));
    const before = await storedCounts(source);
    const forgedPaths = Array.from({ length: 70 }, (_, i) => `/${run}-forged-${i}.pem`);
    const answers = new Set<number>();
    for (const path of forgedPaths) {
      const url = `https://sns.us-east-1.amazonaws.com${path}`;
      const answer = await send(source, request(await signed(notification({ SigningCertURL: url }))));
      await answer.body?.cancel();
      answers.add(answer.status);
    }
    // Refused (no such certificate) while the allowance lasts, then 503 without a fetch: SNS retries a genuine one.
    expect([...answers].sort()).toEqual([401, 503]);
    const fetched = await Promise.all(forgedPaths.map((path) => fetchesOf(path)));
    expect(fetched.reduce((sum, count) => sum + count, 0)).toBeLessThanOrEqual(MAX_LOADS_PER_WINDOW);
    expect(await storedCounts(source)).toEqual(before);
    const genuineFetches = await fetchesOf(certPath);
    await expectAccepted(source, request(await signed(notification())));
    expect(await fetchesOf(certPath)).toBe(genuineFetches);
  });

  it("pins region-shaped hosts in every partition AWS documents", () => {
    for (const host of [
      "sns.us-east-1.amazonaws.com",
      "sns.ap-southeast-2.amazonaws.com",
      "sns.us-gov-west-1.amazonaws.com",
      "sns.cn-northwest-1.amazonaws.com.cn",
    ]) {
      expect(pinnedSnsUrl(`https://${host}/SimpleNotificationService-0123.pem`, "certificate")?.hostname).toBe(host);
    }
    for (const host of [
      "sns.s3.amazonaws.com",
      "sns.s3.us-east-1.amazonaws.com",
      "sns.my-bucket.amazonaws.com",
      "sns.cn-north-1.amazonaws.com",
    ]) {
      expect(pinnedSnsUrl(`https://${host}/SimpleNotificationService-0123.pem`, "certificate")).toBeNull();
    }
  });
});

const minutesAgo = (minutes: number) => new Date(Date.now() - minutes * 60_000).toISOString();

describe("aws-sns: the signed Timestamp", () => {
  it("refuses a message older than the source's dedupe window (35 days by default): a year-old capture is not new again", async () => {
    await expectRejectedAndNothingWritten(
      SOURCE,
      request(await signed(notification({ Timestamp: minutesAgo(365 * 24 * 60) }))),
    );
    await expectRejectedAndNothingWritten(
      SOURCE,
      request(await signed(notification({ Timestamp: minutesAgo(36 * 24 * 60) }))),
    );
    await expectAccepted(SOURCE, request(await signed(notification({ Timestamp: minutesAgo(30 * 24 * 60) }))));
  });

  it("follows the source's own dedupe_retention, and a shorter max_age", async () => {
    await expectRejectedAndNothingWritten(
      "pv-aws-sns-short-window",
      request(await signed(notification({ Timestamp: minutesAgo(3 * 60) }))),
    );
    await expectAccepted("pv-aws-sns-short-window", request(await signed(notification({ Timestamp: minutesAgo(60) }))));
    await expectRejectedAndNothingWritten(
      "pv-aws-sns-max-age",
      request(await signed(notification({ Timestamp: minutesAgo(20) }))),
    );
    await expectAccepted("pv-aws-sns-max-age", request(await signed(notification({ Timestamp: minutesAgo(3) }))));
  });

  it("refuses a Timestamp far ahead of the receiver's clock, or one it cannot read; a little ahead is clock drift", async () => {
    await expectRejectedAndNothingWritten(SOURCE, request(await signed(notification({ Timestamp: minutesAgo(-60) }))));
    for (const Timestamp of ["yesterday", "2026-12-04 10:00:00", String(Date.now())])
      await expectRejectedAndNothingWritten(SOURCE, request(await signed(notification({ Timestamp }))));
    await expectAccepted(SOURCE, request(await signed(notification({ Timestamp: minutesAgo(-1) }))));
  });

  it("says why: timestamp-out-of-tolerance, decided before any certificate is fetched", async () => {
    const path = `/SimpleNotificationService-${run}-stale.pem`;
    await serve(path, signer.certificatePem);
    const body = await signed(
      notification({
        Timestamp: minutesAgo(365 * 24 * 60),
        SigningCertURL: `https://sns.us-east-1.amazonaws.com${path}`,
      }),
    );
    const verdict = await awsSns.verify({
      source: SOURCE,
      rawBody: new TextEncoder().encode(body),
      headers: new Headers(request(body).headers),
      url: `https://receiver.test/webhooks/${SOURCE}`,
      secrets: [{ name: "PV_AWS_SNS_TOPICS", value: TOPIC }],
      now: Date.now(),
      options: {},
      dedupeRetentionMs: 35 * 86_400_000,
    });
    expect(verdict).toEqual({ kind: "rejected", reason: "timestamp-out-of-tolerance" });
    expect(await fetchesOf(path)).toBe(0);
  });

  it("takes max_age as a duration", () => {
    expect(awsSns.validateOptions!({ max_age: "1h" })).toEqual([]);
    for (const value of ["3 days", "0s", true, -5, "1w"])
      expect(awsSns.validateOptions!({ max_age: value })).toHaveLength(1);
  });
});

describe("aws-sns: only what the signature covers is kept", () => {
  async function storedBody(receiptId: string): Promise<Record<string, unknown>> {
    await storedReceipt(SOURCE, receiptId);
    // D1 hands a BLOB back as an array of byte values.
    const row = await env.DB.prepare("SELECT body FROM receipts WHERE id = ?")
      .bind(receiptId)
      .first<{ body: number[] }>();
    return JSON.parse(new TextDecoder().decode(new Uint8Array(row!.body)));
  }
  async function quarantinedCopies(eventKey: string): Promise<number> {
    await storedCounts(SOURCE);
    const row = await env.DB.prepare("SELECT COUNT(*) AS count FROM quarantine WHERE source = ? AND event_key = ?")
      .bind(SOURCE, eventKey)
      .first<{ count: number }>();
    return row!.count;
  }

  it("stores and forwards the signed fields alone: MessageAttributes or any field added after signing is dropped", async () => {
    const message = notification();
    const genuine = JSON.parse(await signed(message, "2"));
    const padded = {
      ...genuine,
      MessageAttributes: { role: { Type: "String", Value: "admin" } },
      Injected: "not from AWS",
      UnsubscribeURL: "https://attacker.test/unsubscribe",
    };
    const receiptId = await expectAccepted(SOURCE, request(JSON.stringify(padded)));
    const kept = await storedBody(receiptId);
    expect(kept).toEqual({
      Message: message.Message,
      MessageId: message.MessageId,
      Subject: message.Subject,
      Timestamp: message.Timestamp,
      TopicArn: TOPIC,
      Type: "Notification",
    });
  });

  it("dedupes on the signed fields: a copy differing only outside them is a duplicate, never a second event or a quarantine", async () => {
    const message = notification();
    const genuine = JSON.parse(await signed(message, "1"));
    const receiptId = await expectAccepted(SOURCE, request(JSON.stringify(genuine)));
    const variants = [
      { ...genuine, MessageAttributes: { role: { Type: "String", Value: "admin" } } },
      { ...genuine, Extra: "1" },
      { ...genuine, SigningCertURL: `${genuine.SigningCertURL}?copy=2` },
      // The same fields in another order and spacing.
      Object.fromEntries(Object.entries(genuine).reverse()),
    ];
    for (const variant of variants) {
      const answer = await claimAnswer(await send(SOURCE, request(JSON.stringify(variant, null, 1))));
      expect(answer).toEqual({ status: "duplicate", receipt: receiptId });
    }
    expect(await quarantinedCopies(message.MessageId)).toBe(0);
    const { results } = await env.DB.prepare("SELECT id FROM receipts WHERE source = ? AND event_key = ?")
      .bind(SOURCE, message.MessageId)
      .all<{ id: string }>();
    expect(results.map((row) => row.id)).toEqual([receiptId]);
  });
});

describe("aws-sns: signature_version = 2", () => {
  it("refuses a SignatureVersion 1 (SHA1) message before fetching anything, and accepts version 2", async () => {
    const path = `/SimpleNotificationService-${run}-v2-only.pem`;
    await serve(path, signer.certificatePem);
    const SigningCertURL = `https://sns.us-east-1.amazonaws.com${path}`;
    await expectRejectedAndNothingWritten(
      "pv-aws-sns-v2",
      request(await signed(notification({ SigningCertURL }), "1")),
    );
    expect(await fetchesOf(path)).toBe(0);
    await expectAccepted("pv-aws-sns-v2", request(await signed(notification({ SigningCertURL }), "2")));
  });

  it("is the only value the option takes", () => {
    expect(awsSns.validateOptions!({ signature_version: 2 })).toEqual([]);
    expect(awsSns.validateOptions!({})).toEqual([]);
    for (const value of [1, "2", 3, true])
      expect(awsSns.validateOptions!({ signature_version: value })).toHaveLength(1);
  });
});

describe("aws-sns: subscription handshakes", () => {
  const subscription = (
    token: string,
    type: "SubscriptionConfirmation" | "UnsubscribeConfirmation" = "SubscriptionConfirmation",
  ): Unsigned => ({
    Type: type,
    MessageId: crypto.randomUUID(),
    TopicArn: TOPIC,
    Token: token,
    Message: "You have chosen to subscribe to the topic.",
    SubscribeURL: `https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription&TopicArn=${encodeURIComponent(TOPIC)}&Token=${token}`,
    Timestamp: new Date().toISOString(),
  });
  const confirmations = (message: Unsigned) => fetchesOf(`/${new URL(message.SubscribeURL!).search}`);

  it("confirms by fetching SubscribeURL once the signature verifies; answered, nothing claimed", async () => {
    const message = subscription(uniqueKey("token"));
    const before = await storedCounts(SOURCE);
    const answer = await send(SOURCE, request(await signed(message, "2")));
    expect(answer.status).toBe(200);
    expect(await confirmations(message)).toBe(1);
    expect(await storedCounts(SOURCE)).toEqual(before);
  });

  it("never fetches SubscribeURL for an unproven confirmation, or one for a topic the source does not list", async () => {
    const forged = subscription(uniqueKey("token"));
    await expectRejectedAndNothingWritten(SOURCE, request(await signed(forged, "1", stranger)));
    const otherTopic = { ...subscription(uniqueKey("token")), TopicArn: "arn:aws:sns:us-east-1:999999999999:theirs" };
    await expectRejectedAndNothingWritten(SOURCE, request(await signed(otherTopic)));
    const offPin = {
      ...subscription(uniqueKey("token")),
      SubscribeURL: "https://attacker.test/?Action=ConfirmSubscription&Token=x",
    };
    await expectRejectedAndNothingWritten(SOURCE, request(await signed(offPin)));
    expect(await confirmations(forged)).toBe(0);
    expect(await confirmations(otherTopic)).toBe(0);
  });

  it("answers 503 when the confirmation cannot be reached, so SNS sends it again", async () => {
    const answer = await send(SOURCE, request(await signed(subscription(uniqueKey("down")))));
    expect(answer.status).toBe(503);
  });

  it("answers a verified UnsubscribeConfirmation without fetching anything or claiming it", async () => {
    const message = subscription(uniqueKey("token"), "UnsubscribeConfirmation");
    const before = await storedCounts(SOURCE);
    expect((await send(SOURCE, request(await signed(message)))).status).toBe(200);
    expect(await confirmations(message)).toBe(0);
    expect(await storedCounts(SOURCE)).toEqual(before);
  });
});
