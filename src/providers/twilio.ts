import { sha256Hex } from "../crypto/digest";
import { utf8Bytes } from "../crypto/encoding";
import { bytesEqualConstantTime } from "../crypto/hmac";
import type { SignatureAlgorithm } from "../crypto/verify";
import { parseFormBody, parseJsonBody } from "./json";
import {
  describePayload,
  event,
  eventKeyOf,
  optionString,
  parseSignatureList,
  presentedSignatures,
  readHeader,
  signedAdapter,
  utf8Key,
} from "./signed";

/**
 * Twilio: `X-Twilio-Signature: <base64>`, HMAC-SHA1 keyed by the account's auth token over the full URL Twilio
 * called followed by every form parameter, sorted by name, as name‖value. JSON bodies are signed the other way:
 * the URL carries `bodySHA256=<hex of the body's SHA-256>` and only the URL is signed, so the body hash is checked
 * too. When a Webhooks Rule signs with a shared key, `X-Twilio-Webhooks-Signature-Settings` says
 * `algorithm=HMAC_SHA256`. The key is `I-Twilio-Idempotency-Token`, the same across Twilio's retries; without it,
 * the payload hash. Behind a proxy or custom domain set `public_origin` to the origin Twilio was given.
 */

const SUBJECT_PARAMS = ["MessageSid", "SmsSid", "CallSid", "RecordingSid", "TranscriptionSid", "ConferenceSid"];
const TYPE_PARAMS = ["EventType", "MessageStatus", "SmsStatus", "CallStatus", "RecordingStatus"];

function signedUrl(url: string, publicOrigin: string | undefined): string {
  if (!publicOrigin) return url;
  const received = new URL(url);
  return publicOrigin.replace(/\/$/, "") + received.pathname + received.search;
}

/** The same URL with its default port spelled out, or dropped: Twilio may sign either (its own library tries both). */
function otherPortSpelling(url: string): string | null {
  const match = /^(https?):\/\/([^/?#:]+)(:\d+)?(.*)$/.exec(url);
  if (!match) return null;
  const [, scheme, host, port, rest] = match;
  const defaultPort = scheme === "https" ? ":443" : ":80";
  if (port === undefined) return `${scheme}://${host}${defaultPort}${rest}`;
  return port === defaultPort ? `${scheme}://${host}${rest}` : null;
}

/** name‖value for every parameter, names sorted, repeated values de-duplicated and sorted, as Twilio signs them. */
function sortedParams(form: URLSearchParams): string {
  let joined = "";
  for (const name of [...new Set(form.keys())].sort()) {
    for (const value of [...new Set(form.getAll(name))].sort()) joined += name + value;
  }
  return joined;
}

function signatureAlgorithm(headers: Headers): SignatureAlgorithm | null {
  const settings = readHeader(headers, "x-twilio-webhooks-signature-settings");
  if (!settings) return "hmac-sha1";
  const algorithm = parseSignatureList(settings, ",", "=")?.find(([name]) => name === "algorithm")?.[1];
  if (algorithm === undefined || algorithm === "HMAC_SHA1") return "hmac-sha1";
  return algorithm === "HMAC_SHA256" ? "hmac-sha256" : null;
}

const sha1Key = utf8Key("hmac-sha1");
const sha256Key = utf8Key("hmac-sha256");

export const twilio = signedAdapter({
  provider: "twilio",
  keptHeaders: ["i-twilio-idempotency-token", "x-twilio-webhooks-signature-settings", "content-type", "user-agent"],

  async read({ headers, rawBody, url, options }) {
    const signature = readHeader(headers, "x-twilio-signature");
    if (!signature) return "missing-signature";
    const algorithm = signatureAlgorithm(headers);
    if (!algorithm) return "malformed-signature";
    const fullUrl = signedUrl(url, optionString(options, "public_origin"));
    const bodyHash = new URL(fullUrl).searchParams.get("bodySHA256");
    let params = "";
    if (bodyHash !== null) {
      const actual = await sha256Hex(rawBody);
      if (!(await bytesEqualConstantTime(utf8Bytes(bodyHash.toLowerCase()), utf8Bytes(actual)))) return "signature-mismatch";
    } else {
      const form = parseFormBody(rawBody);
      if (!form) return "malformed-payload";
      params = sortedParams(form);
    }
    const otherUrl = otherPortSpelling(fullUrl);
    return {
      signatures: presentedSignatures([signature], "base64", algorithm),
      signedContent: utf8Bytes(fullUrl + params),
      alsoSigned: otherUrl ? [utf8Bytes(otherUrl + params)] : [],
    };
  },

  keyFor: (secret) => [sha1Key(secret), sha256Key(secret)],

  validateOptions(options) {
    const origin = options.public_origin;
    return origin === undefined || (typeof origin === "string" && /^https?:\/\/[^/?#\s]+\/?$/.test(origin))
      ? []
      : ['public_origin must be an origin like "https://hooks.example.com"'];
  },

  async identify({ input }) {
    const token = readHeader(input.headers, "i-twilio-idempotency-token");
    const isJson = new URL(input.url).searchParams.has("bodySHA256");
    if (isJson) {
      return event({ ...(await eventKeyOf(token, input.rawBody)), ...describePayload(parseJsonBody(input.rawBody), input.options, {}) });
    }
    const form = parseFormBody(input.rawBody)!;
    const firstParam = (names: string[]) => names.map((name) => form.get(name)).find((value) => value) ?? null;
    return event({
      ...(await eventKeyOf(token, input.rawBody)),
      eventType: firstParam(TYPE_PARAMS),
      subjectId: firstParam(SUBJECT_PARAMS),
      version: null,
      occurredAt: null,
    });
  },
});
