import { sha256Hex } from "../crypto/digest";
import { utf8Bytes } from "../crypto/encoding";
import { bytesEqualConstantTime } from "../crypto/hmac";
import type { SignatureAlgorithm } from "../crypto/verify";
import { parseFormBody, parseJsonBody } from "./json";
import {
  describePayload,
  event,
  optionString,
  parseSignatureList,
  presentedSignatures,
  readHeader,
  signedAdapter,
  signedFormKeyOf,
  utf8Key,
} from "./signed";
import type { ProviderOptions } from "./types";
import { parseUnverifiedForm } from "./unverified";

/**
 * Twilio: `X-Twilio-Signature: <base64>`, HMAC-SHA1 keyed by the account's auth token over the full URL Twilio
 * called followed by every form parameter, sorted by name, as name‖value. JSON bodies are signed the other way:
 * the URL carries `bodySHA256=<hex of the body's SHA-256>` and only the URL is signed, so the body hash is checked
 * too. When a Webhooks Rule signs with a shared key, `X-Twilio-Webhooks-Signature-Settings` says
 * `algorithm=HMAC_SHA256`. The key is `I-Twilio-Idempotency-Token`, the same across Twilio's retries; without it,
 * the payload hash. Neither is what Twilio signs, so claims go under the digest of the signed form (canonicalSignedForm).
 * Behind a proxy that rewrites paths set `public_url` to the full URL Twilio was configured with (user info
 * included, when Twilio was given one); behind a custom domain, `public_origin` is enough. The URL
 * verifies with its port removed or with the default port added, exactly as twilio-node tries it. Twilio reads
 * the answer of a messaging or voice webhook as TwiML, so an accepted delivery is answered with an empty
 * `<Response/>` (text/xml), which does nothing.
 */

const SUBJECT_PARAMS = ["MessageSid", "SmsSid", "CallSid", "RecordingSid", "TranscriptionSid", "ConferenceSid"];
const TYPE_PARAMS = ["EventType", "MessageStatus", "SmsStatus", "CallStatus", "RecordingStatus"];

/**
 * The URL Twilio signed: the source's `public_url` (the full URL Twilio was configured with) when set, with the
 * `bodySHA256` Twilio appends to it for JSON bodies; else `public_origin` plus the path called; else the URL called.
 */
function signedUrl(url: string, options: ProviderOptions): string {
  const received = new URL(url);
  const publicUrl = optionString(options, "public_url");
  if (publicUrl) {
    const bodyHash = received.searchParams.get("bodySHA256");
    if (bodyHash === null || /[?&]bodySHA256=/.test(publicUrl)) return publicUrl;
    return `${publicUrl}${publicUrl.includes("?") ? "&" : "?"}bodySHA256=${bodyHash}`;
  }
  const publicOrigin = optionString(options, "public_origin");
  return publicOrigin ? publicOrigin.replace(/\/$/, "") + received.pathname + received.search : url;
}

/**
 * scheme, user info, host, port and the rest, split the way twilio-node splits them: user info ends at the last
 * `@` of the authority, and a colon starts the port only after an IPv6 literal's closing bracket.
 */
function splitUrl(url: string) {
  const match = /^([a-z][a-z0-9+.-]*:\/\/)([^/?#]*)/i.exec(url);
  if (!match) return null;
  const [prefix, scheme, authority] = match as unknown as [string, string, string];
  const userInfoEnd = authority.lastIndexOf("@");
  const hostAndPort = authority.slice(userInfoEnd + 1);
  const portStart = hostAndPort.indexOf(":", hostAndPort.lastIndexOf("]") + 1);
  return {
    scheme,
    userInfo: authority.slice(0, userInfoEnd + 1),
    host: portStart === -1 ? hostAndPort : hostAndPort.slice(0, portStart),
    port: portStart === -1 ? "" : hostAndPort.slice(portStart),
    rest: url.slice(prefix.length),
  };
}

/**
 * The spellings twilio-node accepts for one URL: with its port removed, and with the default port added when it
 * has none (a URL with an explicit port keeps it in the second spelling). Twilio may have signed either.
 */
export function portSpellings(url: string): string[] {
  const parts = splitUrl(url);
  if (!parts) return [url];
  const withoutPort = parts.scheme + parts.userInfo + parts.host + parts.rest;
  const withPort = parts.port
    ? url
    : parts.scheme +
      parts.userInfo +
      parts.host +
      (parts.scheme.toLowerCase() === "https://" ? ":443" : ":80") +
      parts.rest;
  return withoutPort === withPort ? [withoutPort] : [withoutPort, withPort];
}

/**
 * Every spelling twilio-node's validateRequest accepts for one URL, each with both port spellings: the URL as given
 * (what Twilio signs), then as WHATWG `new URL()` normalizes it (`'` in a query becomes `%27`), for senders that
 * signed the escaped form. The URL called is already normalized; a configured `public_url` may not be. Not tried:
 * twilio-node's last fallback, the query re-encoded by Node's legacy `querystring`.
 */
export function urlSpellings(url: string): string[] {
  let normalized = url;
  try {
    normalized = new URL(url).toString();
  } catch {
    // Not a URL WHATWG can read: only the spelling as given can have been signed.
  }
  return [...new Set([url, normalized].flatMap(portSpellings))];
}

/**
 * A URL configured with user info (`https://user:pass@host/…`) reaches the Worker without it: Twilio moves it to
 * `Authorization: Basic`. The URL Twilio signed still has it, so it is put back from that header.
 */
function withUserInfo(url: string, headers: Headers): string[] {
  const parts = splitUrl(url);
  const match = /^Basic ([A-Za-z0-9+/=]{1,1024})$/i.exec(readHeader(headers, "authorization") ?? "");
  if (!parts || parts.userInfo || !match) return [];
  let credentials: string;
  try {
    credentials = atob(match[1]!);
  } catch {
    return [];
  }
  if (!credentials.includes(":") || /[@/?#\s]/.test(credentials)) return [];
  return [`${parts.scheme + credentials}@${parts.host}${parts.port}${parts.rest}`];
}

/** An empty TwiML document: Twilio reads the answer of messaging and voice webhooks as instructions, and this is none. */
const EMPTY_TWIML = '<?xml version="1.0" encoding="UTF-8"?><Response></Response>';

/**
 * name‖value for every parameter, names sorted, repeated values de-duplicated and sorted, as Twilio signs them.
 * One pass groups the values by name: this runs before the MAC, so it must stay linear (never a lookup per name).
 */
function sortedParams(form: URLSearchParams): string {
  const valuesByName = new Map<string, Set<string>>();
  for (const [name, value] of form) {
    const values = valuesByName.get(name);
    if (values) values.add(value);
    else valuesByName.set(name, new Set([value]));
  }
  let joined = "";
  for (const name of [...valuesByName.keys()].sort()) {
    for (const value of [...valuesByName.get(name)!].sort()) joined += name + value;
  }
  return joined;
}

/**
 * One spelling of what Twilio signs, whatever spelling of it arrived: the signed URL with its port removed (the first
 * of the spellings tried, never the user info an `Authorization` header would add) plus the sorted parameters, or for
 * a JSON body the URL alone (its `bodySHA256` fixes the body). Reordered, re-encoded or repeated parameters and a
 * dropped or changed `I-Twilio-Idempotency-Token` leave it unchanged, as they leave the signature valid.
 */
function canonicalSignedForm(url: string, form: URLSearchParams | null): string {
  return portSpellings(url)[0]! + (form ? sortedParams(form) : "");
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
    const fullUrl = signedUrl(url, options);
    const bodyHash = new URL(fullUrl).searchParams.get("bodySHA256");
    let params = "";
    if (bodyHash !== null) {
      const actual = await sha256Hex(rawBody);
      if (!(await bytesEqualConstantTime(utf8Bytes(bodyHash.toLowerCase()), utf8Bytes(actual))))
        return "signature-mismatch";
    } else {
      const form = parseUnverifiedForm(rawBody);
      if (!form) return "malformed-payload";
      params = sortedParams(form);
    }
    const [first, ...others] = [...new Set([...withUserInfo(fullUrl, headers), fullUrl].flatMap(urlSpellings))];
    return {
      signatures: presentedSignatures([signature], "base64", algorithm),
      signedContent: utf8Bytes(first + params),
      alsoSigned: others.map((spelling) => utf8Bytes(spelling + params)),
    };
  },

  keyFor: (secret) => [sha1Key(secret), sha256Key(secret)],

  validateOptions(options) {
    const problems: string[] = [];
    const origin = options.public_origin;
    if (!(origin === undefined || (typeof origin === "string" && /^https?:\/\/[^/?#\s]+\/?$/.test(origin)))) {
      problems.push('public_origin must be an origin like "https://hooks.example.com"');
    }
    const url = options.public_url;
    if (!(url === undefined || (typeof url === "string" && /^https?:\/\/[^\s]+$/.test(url)))) {
      problems.push(
        'public_url must be the full URL Twilio was configured with, like "https://hooks.example.com/sms?x=1"',
      );
    }
    if (origin !== undefined && url !== undefined) problems.push("set public_url or public_origin, not both");
    return problems;
  },

  async identify({ input }) {
    const token = readHeader(input.headers, "i-twilio-idempotency-token");
    const isJson = new URL(input.url).searchParams.has("bodySHA256");
    const form = isJson ? null : parseFormBody(input.rawBody)!;
    const key = await signedFormKeyOf(token, input.rawBody, {
      sha256: await sha256Hex(utf8Bytes(canonicalSignedForm(signedUrl(input.url, input.options), form))),
      coversBody: true,
    });
    if (!form) return event({ ...key, ...describePayload(parseJsonBody(input.rawBody), input.options, {}) });
    const firstParam = (names: string[]) => names.map((name) => form.get(name)).find((value) => value) ?? null;
    return {
      ...event({
        ...key,
        eventType: firstParam(TYPE_PARAMS),
        subjectId: firstParam(SUBJECT_PARAMS),
        version: null,
        occurredAt: null,
      }),
      acknowledgement: { status: 200, text: EMPTY_TWIML, contentType: "text/xml; charset=utf-8" },
    };
  },
});
