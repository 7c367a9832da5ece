import fc from "fast-check";
import { X509CertificateGenerator } from "../../../src/providers/x509";
import { uniqueKey } from "../support/contract";
import { keyStandinOrigin } from "../support/key-standin";
import { composed, type Sender } from "./property";
import { jsonFieldsChanged, jsonReencoded, unsignedHeaders } from "./reencode";

/**
 * AWS SNS: RSA over the string to sign, `Key\nValue\n` for the fields AWS lists per type — not the JSON around
 * them, nor `MessageAttributes`, `UnsubscribeURL` or the x-amz-sns-* headers. Signed here with a self-made key whose
 * certificate the key stand-in serves at a pinned SNS URL (as test/providers/aws-sns.test.ts does); the string to
 * sign is written out below from AWS's documentation, not taken from the receiver.
 */

const TOPIC = "arn:aws:sns:us-east-1:123456789012:receiver-orders";
const SIGNED_FIELDS = ["Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"] as const;

export function snsSender(): Sender {
  let privateKey: CryptoKey | undefined;
  const certificateUrl = `https://sns.us-east-1.amazonaws.com/SimpleNotificationService-${uniqueKey("variants")}.pem`;
  return {
    provider: "aws-sns",
    source: "pv-aws-sns",
    async setup() {
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
          name: "CN=sns.amazonaws.com",
          notBefore: new Date(Date.now() - 86_400_000),
          notAfter: new Date(Date.now() + 86_400_000),
          keys,
          signingAlgorithm: algorithm,
        },
        crypto,
      );
      const served = await fetch(`${keyStandinOrigin()}/__serve${new URL(certificateUrl).pathname}`, {
        method: "PUT",
        body: certificate.toString("pem"),
      });
      if (served.status !== 204) throw new Error(`the key stand-in refused the certificate: ${served.status}`);
      privateKey = keys.privateKey;
    },
    async deliver(marker) {
      const message: Record<string, string> = {
        Type: "Notification",
        MessageId: crypto.randomUUID(),
        TopicArn: TOPIC,
        Subject: "order placed",
        Message: JSON.stringify({ order: marker }),
        Timestamp: new Date().toISOString(),
      };
      const stringToSign = SIGNED_FIELDS.map((field) => `${field}\n${message[field]}\n`).join("");
      const signature = await crypto.subtle.sign(
        "RSASSA-PKCS1-v1_5",
        privateKey!,
        new TextEncoder().encode(stringToSign),
      );
      const body = JSON.stringify({
        ...message,
        SignatureVersion: "2",
        Signature: btoa(String.fromCharCode(...new Uint8Array(signature))),
        SigningCertURL: certificateUrl,
        UnsubscribeURL: `https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=${TOPIC}:1`,
      });
      return {
        body,
        headers: {
          "content-type": "text/plain; charset=UTF-8",
          "x-amz-sns-message-type": "Notification",
          "x-amz-sns-message-id": message.MessageId!,
          "x-amz-sns-topic-arn": TOPIC,
        },
      };
    },
    variants: composed(
      fc.oneof(
        jsonReencoded,
        jsonFieldsChanged(["MessageAttributes.origin.Value", "UnsubscribeURL", "note"]),
        unsignedHeaders(["x-amz-sns-message-id", "x-amz-sns-topic-arn", "x-amz-sns-subscription-arn"]),
      ),
    ),
  };
}
