// A sample made new for each send, for the senders whose signature does not cover their delivery id (GitHub's
// X-GitHub-Delivery, Shopify's X-Shopify-Webhook-Id, …): the receiver claims those by what the signature covers,
// the body (src/model/claims.ts, claimKeyOf), so the same sample under a fresh id would be a duplicate from the
// second send on. Each entry writes the fresh event key, or the time, into a field that provider's payload has.
import { createHash } from "node:crypto";
import { withValueAt } from "./payload.mjs";

/** @typedef {{ eventKey: string, now: Date }} Fresh */

const hexOf = (/** @type {string} */ algorithm, /** @type {string} */ text) =>
  createHash(algorithm).update(text).digest("hex");

/** @type {Record<string, (payload: unknown, fresh: Fresh) => unknown>} */
const FRESH_FIELDS = {
  github: (payload, { now }) => withValueAt(payload, "issue.updated_at", now.toISOString()),
  shopify: (payload, { now }) => withValueAt(payload, "updated_at", now.toISOString()),
  gitlab: (payload, { now }) => withValueAt(payload, "object_attributes.updated_at", now.toISOString()),
  woocommerce: (payload, { now }) => withValueAt(payload, "date_modified", now.toISOString()),
  sentry: (payload, { now }) => withValueAt(payload, "data.issue.lastSeen", now.toISOString()),
  // Twilio: a new message is a new MessageSid (SM and 32 hex digits), repeated as SmsSid.
  twilio: (payload, { eventKey }) => {
    const sid = `SM${hexOf("md5", eventKey)}`;
    return withValueAt(withValueAt(payload, "MessageSid", sid), "SmsSid", sid);
  },
  zendesk: (payload, { eventKey }) => withValueAt(payload, "id", eventKey),
  box: (payload, { eventKey }) => withValueAt(payload, "id", eventKey),
  razorpay: (payload, { eventKey }) =>
    withValueAt(payload, "payload.payment.entity.id", `pay_${hexOf("sha256", eventKey).slice(0, 14)}`),
  bitbucket: (payload, { eventKey }) => withValueAt(payload, "push.changes.0.new.target.hash", hexOf("sha1", eventKey)),
};

/**
 * The sample with this send's fresh value written in, for a provider listed above; any other sample as it is (its
 * signed id already differs per send). A string sample (a file that is not JSON) goes out untouched.
 * @param {string} provider
 * @param {unknown} payload
 * @param {Fresh} fresh
 */
export function freshSample(provider, payload, fresh) {
  const write = FRESH_FIELDS[provider];
  return write ? write(payload, fresh) : payload;
}
