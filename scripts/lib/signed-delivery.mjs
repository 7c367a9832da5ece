// Node-side senders (npm run send, the bench, the browser test) sign demo deliveries here, always with the
// maintained `standardwebhooks` library rather than our own code, so the receiver is checked against an
// independent signer.
import { Webhook } from "standardwebhooks";

/** @type {Map<string, Webhook>} */
const signers = new Map();

/**
 * Headers of a Standard Webhooks delivery of `body`, signed with `secret` at `at`.
 * @param {string} secret a `whsec_…` secret
 * @param {string} webhookId the delivery's stable id (the receiver's dedupe key)
 * @param {string} body the exact bytes to send
 * @param {Date} [at] the signing time; a retry signs afresh, as real senders do
 * @returns {Record<string, string>}
 */
export function standardWebhookHeaders(secret, webhookId, body, at = new Date()) {
  let signer = signers.get(secret);
  if (!signer) {
    signer = new Webhook(secret);
    signers.set(secret, signer);
  }
  return {
    "content-type": "application/json",
    "webhook-id": webhookId,
    "webhook-timestamp": String(Math.floor(at.getTime() / 1000)),
    "webhook-signature": signer.sign(webhookId, at, body),
  };
}
