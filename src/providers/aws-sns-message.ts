/**
 * AWS SNS messages as AWS documents them for HTTP/S endpoints: which fields each message type signs, in which
 * order, and which hosts its certificate and subscribe URLs may name. Pure: no fetch, no crypto.
 */

export type SnsMessageType = "Notification" | "SubscriptionConfirmation" | "UnsubscribeConfirmation";

export interface SnsMessage {
  Type: SnsMessageType;
  MessageId: string;
  TopicArn: string;
  Message: string;
  Timestamp: string;
  SignatureVersion: "1" | "2";
  Signature: string;
  SigningCertURL: string;
  Subject?: string;
  SubscribeURL?: string;
  Token?: string;
}

/** The signed fields per type, in AWS's (alphabetical) order; Subject only when the notification has one. */
const SIGNED_FIELDS: Record<SnsMessageType, readonly (keyof SnsMessage)[]> = {
  Notification: ["Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"],
  SubscriptionConfirmation: ["Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"],
  UnsubscribeConfirmation: ["Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"],
};

const TYPES = new Set<string>(Object.keys(SIGNED_FIELDS));
const MAX_FIELD_CHARS = 300_000;

/** The message when every field its type signs (and the signature's own fields) is a string; null otherwise. */
export function snsMessage(payload: unknown): SnsMessage | null {
  if (!payload || typeof payload !== "object" || Array.isArray(payload)) return null;
  const record = payload as Record<string, unknown>;
  if (typeof record.Type !== "string" || !TYPES.has(record.Type)) return null;
  const type = record.Type as SnsMessageType;
  const required = [
    ...SIGNED_FIELDS[type].filter((field) => field !== "Subject"),
    "SignatureVersion",
    "Signature",
    "SigningCertURL",
  ];
  for (const field of required) {
    const value = record[field];
    if (typeof value !== "string" || value.length === 0 || value.length > MAX_FIELD_CHARS) return null;
  }
  if (record.Subject !== undefined && typeof record.Subject !== "string") return null;
  if (record.SignatureVersion !== "1" && record.SignatureVersion !== "2") return null;
  return record as unknown as SnsMessage;
}

/** The fields the message's signature covers, with their values, in AWS's order. */
function signedEntries(message: SnsMessage): [keyof SnsMessage, string][] {
  return SIGNED_FIELDS[message.Type].flatMap((field) => {
    const value = message[field];
    return value === undefined ? [] : [[field, value]];
  });
}

/** `Key\nValue\n` for each signed field, the string AWS signed. */
export function snsStringToSign(message: SnsMessage): string {
  return signedEntries(message)
    .map(([field, value]) => `${field}\n${value}\n`)
    .join("");
}

/**
 * The message as AWS signed it: a JSON object of exactly the fields its string to sign covers, in that order. What
 * is kept, hashed and forwarded for a notification: a field outside the signature (`MessageAttributes`, which SNS
 * itself sends unsigned, or anything added on the way) is dropped, and the signature's own fields (`Signature`,
 * `SignatureVersion`, `SigningCertURL`, `UnsubscribeURL`) are not signed either: the receiver has checked the
 * signature, and a copy spelling them differently (a certificate URL with a query string, base64 with other padding
 * bits) is the same event.
 */
export function snsSignedBody(message: SnsMessage): string {
  return JSON.stringify(Object.fromEntries(signedEntries(message)));
}

/** How far ahead of the receiver's clock a signed Timestamp may be: clocks drift, AWS's and ours. */
export const SNS_FUTURE_SKEW_MS = 5 * 60_000;
/** AWS's spelling of Timestamp (`2012-05-02T00:54:06.655Z`): nothing Date.parse would merely guess at. */
const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?Z$/;

/**
 * Whether the signed Timestamp is acceptable at `now`: readable, at most SNS_FUTURE_SKEW_MS ahead, and younger than
 * `maxAgeMs` less that allowance. A message is remembered for the dedupe window from its arrival, which can be up to
 * the allowance before its Timestamp: the oldest one accepted must still be remembered when a copy comes again.
 */
export function snsTimestampFresh(timestamp: string, now: number, maxAgeMs: number): boolean {
  if (!ISO_INSTANT.test(timestamp)) return false;
  const signedAt = Date.parse(timestamp);
  if (Number.isNaN(signedAt)) return false;
  return signedAt - now <= SNS_FUTURE_SKEW_MS && now - signedAt < maxAgeMs - SNS_FUTURE_SKEW_MS;
}

/** A region's name as AWS spells them (`us-east-1`, `ap-southeast-2`, `us-gov-west-1`, `cn-northwest-1`). */
const REGION = "[a-z]{2}(?:-gov)?-(?:north|south|east|west|central|northeast|northwest|southeast|southwest)-\\d{1,2}";

/**
 * `sns.<region>.amazonaws.com`, or `sns.cn-<…>.amazonaws.com.cn` in the China partition: the only hosts a
 * certificate or subscribe URL may name. The region must be region-shaped: `sns.s3.amazonaws.com` is an S3 bucket
 * named `sns`, which anyone can create and fill.
 */
const SNS_HOST = new RegExp(`^sns\\.(?:(?!cn-)${REGION}\\.amazonaws\\.com|cn-[a-z]+-\\d{1,2}\\.amazonaws\\.com\\.cn)$`);

/**
 * The names AWS issues SNS signing certificates to: `sns.amazonaws.com` in most regions, `sns-<region>.amazonaws.com`
 * (GovCloud) or `.amazonaws.com.cn` (China), `sns-signing.<region>.amazonaws.com` in opt-in regions.
 */
const SNS_SIGNING_NAME = new RegExp(`^(?:sns|sns-${REGION}|sns-signing\\.${REGION})\\.amazonaws\\.com(?:\\.cn)?$`);

/** Whether a certificate subject (its CN or a DNS subject alternative name) is one SNS signs with. */
export function isSnsSigningName(name: string): boolean {
  return SNS_SIGNING_NAME.test(name.toLowerCase());
}

/**
 * The URL when it is https on an SNS host with no port or user info, else null. `certificate` also requires a
 * `.pem` path, as every SigningCertURL AWS sends has, and drops any query or fragment (AWS sends none): one
 * certificate then has one URL, so varying a query cannot turn one name into endless cache misses, each a fetch.
 */
export function pinnedSnsUrl(text: string, kind: "certificate" | "subscribe"): URL | null {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return null;
  }
  if (url.protocol !== "https:" || url.port !== "" || url.username !== "" || url.password !== "") return null;
  if (!SNS_HOST.test(url.hostname)) return null;
  if (kind === "certificate") {
    if (!url.pathname.endsWith(".pem")) return null;
    url.search = "";
    url.hash = "";
  }
  return url;
}
