import { decodeBase64, utf8Bytes } from "../crypto/encoding";
import { parseDuration } from "../lib/duration";
import {
  isSnsSigningName,
  pinnedSnsUrl,
  type SnsMessage,
  snsMessage,
  snsSignedBody,
  snsStringToSign,
  snsTimestampFresh,
} from "./aws-sns-message";
import { handshake } from "./handshake";
import { type Fetched, KeyCache } from "./key-cache";
import { fetchPinned } from "./key-fetch";
import { annotationsFrom, rejected } from "./signed";
import type { DeliveryInput, ProviderAdapter, VerifyResult } from "./types";
import { parseUnverifiedJson } from "./unverified";
import { SubjectAlternativeNameExtension, X509Certificate } from "./x509";

/**
 * AWS SNS over HTTP/S. The body is a JSON message signed with RSA by the certificate at its `SigningCertURL`:
 * SignatureVersion 1 is SHA1withRSA, 2 is SHA256withRSA, over AWS's string to sign for the message type
 * (src/providers/aws-sns-message.ts); `signature_version = 2` accepts only 2. The certificate is fetched only from
 * a region-shaped `https://sns.<region>.amazonaws.com/…` (src/providers/key-fetch.ts: timeout, 503 while it cannot
 * be fetched; src/providers/key-cache.ts: per-isolate cache, refusals remembered, fetches in flight capped per
 * source), and must be issued to an SNS signing name (`sns.amazonaws.com`, …).
 *
 * A valid AWS signature proves AWS sent the message, not that it came from your topic: anyone can sign messages
 * from a topic of their own. So the source's `secrets` name Worker secrets holding the topic ARNs it accepts (one
 * ARN, or several separated by commas), and a message from any other topic is refused like a bad signature.
 *
 * - Notification: an event keyed by `MessageId` (SNS keeps it across retries). Only the fields the signature covers
 *   are kept (aws-sns-message.ts `snsSignedBody`), and its signed `Timestamp` must be younger than the source's
 *   dedupe window (or a shorter `max_age`): SNS signs no other time, and an older captured copy would be new again
 *   once its key is forgotten.
 * - SubscriptionConfirmation: confirmed by fetching its `SubscribeURL` (pinned to the same hosts) only after the
 *   signature and topic check out; answered, never claimed. A confirmation that cannot be reached is a 503.
 * - UnsubscribeConfirmation: verified and answered; nothing is fetched (re-subscribing is the operator's call).
 */

interface SigningCertificate {
  spki: ArrayBuffer;
  notBefore: number;
  notAfter: number;
  /** Its public key imported once per hash, kept with the cached certificate. */
  imported: Partial<Record<"SHA-1" | "SHA-256", Promise<CryptoKey>>>;
}

const certificates = new KeyCache<SigningCertificate>();
const HASH_OF_VERSION = { "1": "SHA-1", "2": "SHA-256" } as const;

function signingCertificate(url: URL, source: string): Promise<Fetched<SigningCertificate>> {
  return certificates.get(url.href, source, () =>
    fetchPinned(url, { method: "GET" }, async (response): Promise<Fetched<SigningCertificate>> => {
      try {
        const certificate = new X509Certificate(await response.text());
        // Defence in depth behind the host pin: a certificate not issued to SNS verifies nothing.
        if (!namesSns(certificate)) return { kind: "refused" };
        return {
          kind: "found",
          value: {
            spki: certificate.publicKey.rawData,
            notBefore: certificate.notBefore.getTime(),
            notAfter: certificate.notAfter.getTime(),
            imported: {},
          },
        };
      } catch {
        // The pinned host answered with something that is no certificate: nothing to verify with.
        return { kind: "refused" };
      }
    }),
  );
}

/** Whether the certificate's subject CN, or one of its DNS subject alternative names, is an SNS signing name. */
function namesSns(certificate: X509Certificate): boolean {
  const alternativeNames = certificate.getExtension(SubjectAlternativeNameExtension)?.names.items ?? [];
  const dnsNames = alternativeNames.filter((name) => name.type === "dns").map((name) => name.value);
  return [...certificate.subjectName.getField("CN"), ...dnsNames].some(isSnsSigningName);
}

async function signatureVerifies(message: SnsMessage, certificate: SigningCertificate, now: number): Promise<boolean> {
  if (now < certificate.notBefore || now > certificate.notAfter) return false;
  const signature = decodeBase64(message.Signature);
  if (!signature || signature.length === 0) return false;
  const hash = HASH_OF_VERSION[message.SignatureVersion];
  try {
    const importing =
      certificate.imported[hash] ??
      crypto.subtle.importKey("spki", certificate.spki, { name: "RSASSA-PKCS1-v1_5", hash }, false, ["verify"]);
    certificate.imported[hash] = importing;
    const key = await importing;
    return await crypto.subtle.verify("RSASSA-PKCS1-v1_5", key, signature, utf8Bytes(snsStringToSign(message)));
  } catch {
    // Not an RSA key (or one WebCrypto refuses): it verifies nothing.
    return false;
  }
}

/**
 * The oldest signed Timestamp accepted: the source's dedupe window, or its `max_age` when shorter (a longer one would
 * let a copy past the window in as new, so the window still bounds it).
 */
function maxAgeMs(input: DeliveryInput): number {
  const maxAge = input.options.max_age === undefined ? null : parseDuration(input.options.max_age);
  return Math.min(input.dedupeRetentionMs ?? Number.POSITIVE_INFINITY, maxAge ?? Number.POSITIVE_INFINITY);
}

/** The listed secret holding this topic ARN (each holds one or several, comma-separated), or undefined. */
function secretAccepting(input: DeliveryInput, topicArn: string): string | undefined {
  return input.secrets.find((secret) =>
    secret.value
      .split(",")
      .map((arn) => arn.trim())
      .some((arn) => arn.length > 0 && arn === topicArn),
  )?.name;
}

async function confirmSubscription(message: SnsMessage): Promise<VerifyResult> {
  const subscribeUrl = pinnedSnsUrl(message.SubscribeURL!, "subscribe");
  if (!subscribeUrl) return rejected("malformed-payload");
  const confirmed = await fetchPinned(subscribeUrl, { method: "GET" }, async (response) => {
    await response.body?.cancel();
    return { kind: "found", value: true };
  });
  if (confirmed.kind === "unavailable") return { kind: "unavailable", reason: "subscription-confirmation-unreachable" };
  // SNS refused the confirmation (an expired token): retrying the same message cannot change that.
  if (confirmed.kind === "refused") return rejected("malformed-payload");
  return handshake(new Response(null, { status: 200 }));
}

export const awsSns: ProviderAdapter = {
  provider: "aws-sns",
  keptHeaders: [
    "x-amz-sns-message-type",
    "x-amz-sns-message-id",
    "x-amz-sns-topic-arn",
    "x-amz-sns-subscription-arn",
    "user-agent",
  ],

  validateOptions(options) {
    const problems: string[] = [];
    const version = options.signature_version;
    if (version !== undefined && version !== 2)
      problems.push("signature_version must be 2 (accept only SHA256withRSA messages), or unset to accept 1 and 2");
    if (options.max_age !== undefined && !((parseDuration(options.max_age) ?? 0) > 0))
      problems.push(`max_age must be a duration like "15m", "1h" or "3d" (got ${JSON.stringify(options.max_age)})`);
    return problems;
  },

  async verify(input) {
    if (input.secrets.length === 0) return rejected("no-usable-secret");
    const payload = parseUnverifiedJson(input.rawBody);
    if (payload === undefined) return rejected("malformed-payload");
    if (!payload || typeof payload !== "object" || typeof (payload as Record<string, unknown>).Signature !== "string") {
      return rejected("missing-signature");
    }
    const message = snsMessage(payload);
    if (!message) return rejected("malformed-signature");
    // A topic set to SignatureVersion 2 never sends SHA1: a v1 message for it is refused before anything is fetched.
    if (input.options.signature_version === 2 && message.SignatureVersion !== "2")
      return rejected("malformed-signature");
    // Before any fetch: a stale copy is refused at the price of a parse.
    if (!snsTimestampFresh(message.Timestamp, input.now, maxAgeMs(input)))
      return rejected("timestamp-out-of-tolerance");
    const certificateUrl = pinnedSnsUrl(message.SigningCertURL, "certificate");
    // A certificate anywhere else is never fetched: the message is a forgery.
    if (!certificateUrl) return rejected("malformed-signature");

    const certificate = await signingCertificate(certificateUrl, input.source ?? "");
    if (certificate.kind === "unavailable")
      return {
        kind: "unavailable",
        reason: certificate.busy ? "key-fetches-at-capacity" : "signing-certificate-unreachable",
      };
    if (certificate.kind === "refused") return rejected("signature-mismatch");
    if (!(await signatureVerifies(message, certificate.value, input.now))) return rejected("signature-mismatch");
    const verifiedBy = secretAccepting(input, message.TopicArn);
    if (verifiedBy === undefined) return rejected("signature-mismatch");
    certificates.proved(certificateUrl.href, certificate.value);

    if (message.Type === "SubscriptionConfirmation") return confirmSubscription(message);
    if (message.Type === "UnsubscribeConfirmation") return handshake(new Response(null, { status: 200 }));
    const occurredAt = Date.parse(message.Timestamp);
    return {
      kind: "event",
      verifiedBy,
      storedBody: utf8Bytes(snsSignedBody(message)),
      timestampAgeSeconds: Math.round((input.now - occurredAt) / 1000),
      identity: {
        eventKey: message.MessageId,
        eventKeyOrigin: "provider-id",
        // MessageId is part of the string to sign.
        eventKeySigned: true,
        eventType: "Notification",
        subjectId: message.TopicArn,
        version: null,
        occurredAt,
        annotations: annotationsFrom({ "sns-signature-version": message.SignatureVersion }),
      },
    };
  },
};

/** Tests: forget every certificate this isolate fetched. */
export function forgetSnsCertificates(): void {
  certificates.clear();
}
