import { concatBytes, decodeBase64, decodeHex, utf8Bytes } from "../crypto/encoding";
import type { SignatureAlgorithm, VerificationKey } from "../crypto/verify";
import { parseJsonBody, stringAtPath } from "./json";
import {
  annotationsFrom,
  describePayload,
  event,
  eventKeyOf,
  optionString,
  parseSignatureList,
  parseUnixSeconds,
  presentedSignatures,
  readHeader,
  type SignatureEncoding,
  signedAdapter,
} from "./signed";
import type { DeliveryInput, ProviderAdapter, RejectReason } from "./types";

/**
 * Senders whose scheme is "a MAC of some signed parts, in a header" (or a shared token in a header), written as
 * data: where the signature sits and how it is spelled, which parts are signed, where the time and the dedupe key
 * live. One reader and one identity rule serve all of them, so a new sender of this shape is a table entry.
 */

/** One piece of the signed content, concatenated in order. */
export type SignedPart = "body" | "timestamp" | "method" | "url" | { literal: string };

export interface Located {
  header?: string;
  path?: string;
  /** The name of the body's one top-level key besides this one (Telegram: `message`, `callback_query`, …). */
  otherKeyThan?: string;
}

export interface PresetSpec {
  provider: string;
  /** Signature header(s); the first must be present, the others (a second key during a roll) may be. */
  signatureHeader: string | readonly string[];
  algorithm: Extract<SignatureAlgorithm, "hmac-sha1" | "hmac-sha256" | "hmac-sha512" | "token">;
  encoding: SignatureEncoding;
  /** Stripped from each signature (`sha256=`); a signature without it is malformed. */
  prefix?: string;
  /** `t=<unix>,v1=<mac>` lists: the separators and the names of the signature and timestamp entries. */
  list?: { entries: string; pair: string; signature: string; timestamp?: string };
  /** The timestamp in a header of its own. */
  timestampHeader?: string;
  timestampFormat?: "unix-s" | "unix-ms" | "rfc3339";
  toleranceSeconds?: number;
  signs: readonly SignedPart[];
  /** How the listed secret is written; utf8 when absent. */
  secretEncoding?: "utf8" | "hex" | "base64";
  /** Token schemes: the header carries `Basic base64(user:pass)`, compared whole as `user:pass`. */
  basicAuth?: boolean;
  /** The provider's id, stable across its retries; absent means the payload's SHA-256, and the receipt says so. */
  eventKey?: Located;
  type?: Located & { join?: string };
  subjectPath?: string;
  occurredAtPath?: string;
  keptHeaders: readonly string[];
  /** Correlation headers kept as annotations (retry counters and the like). */
  annotations?: readonly string[];
  /**
   * Characters whose percent-encodings (either hex case) the sender decodes in the URL before signing it; every
   * other encoding stays as received (HubSpot v3).
   */
  urlDecodes?: readonly string[];
}

function located(input: DeliveryInput, payload: unknown, where: Located | undefined): string | null {
  if (!where) return null;
  if (where.header) return readHeader(input.headers, where.header);
  if (where.otherKeyThan) {
    const keys =
      payload && typeof payload === "object" && !Array.isArray(payload)
        ? Object.keys(payload).filter((key) => key !== where.otherKeyThan)
        : [];
    return keys.length === 1 ? keys[0]! : null;
  }
  return stringAtPath(payload, where.path);
}

function signedAtOf(text: string, format: PresetSpec["timestampFormat"]): number | null {
  if (format === "rfc3339") {
    if (!/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,9})?(?:Z|[+-]\d{2}:\d{2})$/.test(text)) return null;
    const ms = Date.parse(text);
    return Number.isNaN(ms) ? null : Math.floor(ms / 1000);
  }
  return parseUnixSeconds(text, format === "unix-ms" ? "ms" : "s");
}

/** The URL the sender signed: the source's `public_url` when set (a proxy or custom domain), else the one called. */
export function signedUrlOf(input: DeliveryInput): string {
  return optionString(input.options, "public_url") ?? input.url;
}

/** The URL with only the listed characters' percent-encodings decoded (the rest stays as received). */
export function decodingOnly(url: string, characters: readonly string[] | undefined): string {
  if (!characters || characters.length === 0) return url;
  const decoded = new Map(
    characters.map((character) => [character.charCodeAt(0).toString(16).toUpperCase().padStart(2, "0"), character]),
  );
  return url.replace(/%([0-9A-Fa-f]{2})/g, (encoding, hex: string) => decoded.get(hex.toUpperCase()) ?? encoding);
}

/**
 * Whether the scheme signs the URL and the body back to back (HubSpot v3: method ‖ URL ‖ body ‖ timestamp), with
 * nothing between them to say where one ends: bytes can then move between a query string and the body under one
 * signature (`?a=1` + `[…]` and `?a=` + `1[…]` sign alike), and a changed delivery would verify as genuine.
 */
function signsUrlThenBody(spec: PresetSpec): boolean {
  return spec.signs.some((part, index) => part === "url" && spec.signs[index + 1] === "body");
}

/**
 * The URL's end is fixed when it is the source's `public_url`, or when the URL called has no query: the path ends
 * in the source's name, which the route matched exactly. A query in the URL called leaves it movable, so refused.
 */
function signedUrlEndIsFixed(input: DeliveryInput): boolean {
  return optionString(input.options, "public_url") !== undefined || !input.url.includes("?");
}

function presetRead(spec: PresetSpec) {
  const headers = typeof spec.signatureHeader === "string" ? [spec.signatureHeader] : spec.signatureHeader;
  const urlThenBody = signsUrlThenBody(spec);
  return (input: DeliveryInput) => {
    const values = headers.map((name) => readHeader(input.headers, name));
    if (!values[0]) return "missing-signature" as RejectReason;
    if (urlThenBody && !signedUrlEndIsFixed(input)) return "ambiguous-signed-url" as RejectReason;
    let candidates = values.filter((value): value is string => value !== null);
    let timestampText: string | null = null;
    if (spec.list) {
      const entries = parseSignatureList(candidates[0]!, spec.list.entries, spec.list.pair);
      if (!entries) return "malformed-signature" as RejectReason;
      candidates = entries.filter(([name]) => name === spec.list!.signature).map(([, value]) => value);
      if (spec.list.timestamp) timestampText = entries.find(([name]) => name === spec.list!.timestamp)?.[1] ?? null;
    } else if (spec.timestampHeader) {
      timestampText = readHeader(input.headers, spec.timestampHeader);
    }
    if ((spec.list?.timestamp || spec.timestampHeader) && !timestampText) return "missing-signature" as RejectReason;
    let signedAt: number | undefined;
    if (timestampText !== null) {
      const parsed = signedAtOf(timestampText, spec.timestampFormat);
      if (parsed === null) return "malformed-signature" as RejectReason;
      signedAt = parsed;
    }
    if (spec.prefix) {
      if (!candidates.every((candidate) => candidate.startsWith(spec.prefix!)))
        return "malformed-signature" as RejectReason;
      candidates = candidates.map((candidate) => candidate.slice(spec.prefix!.length));
    }
    if (spec.algorithm === "token") {
      const tokens = spec.basicAuth ? candidates.map(basicCredentials) : candidates;
      if (tokens.some((token) => token === null)) return "malformed-signature" as RejectReason;
      return {
        signatures: tokens.map((token) => ({ algorithm: "token" as const, bytes: utf8Bytes(token!) })),
        signedContent: new Uint8Array(0),
      };
    }
    const parts = spec.signs.map((part): Uint8Array => {
      if (part === "body") return input.rawBody;
      if (part === "timestamp") return utf8Bytes(timestampText ?? "");
      if (part === "method") return utf8Bytes(input.method ?? "POST");
      if (part === "url") return utf8Bytes(decodingOnly(signedUrlOf(input), spec.urlDecodes));
      return utf8Bytes(part.literal);
    });
    return {
      signatures: presentedSignatures(candidates, spec.encoding, spec.algorithm),
      signedAt,
      signedContent: concatBytes(...parts),
    };
  };
}

/** `Basic base64(user:pass)` → `user:pass`; anything else is null. */
function basicCredentials(header: string): string | null {
  const match = /^Basic ([A-Za-z0-9+/=]+)$/i.exec(header);
  const bytes = match ? decodeBase64(match[1]!) : null;
  if (!bytes) return null;
  try {
    const text = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes);
    return text.includes(":") ? text : null;
  } catch {
    return null;
  }
}

function presetKey(spec: PresetSpec) {
  return (secret: string): VerificationKey | null => {
    const material =
      spec.secretEncoding === "hex"
        ? decodeHex(secret)
        : spec.secretEncoding === "base64"
          ? decodeBase64(secret)
          : utf8Bytes(secret);
    return material && material.length > 0 ? { algorithm: spec.algorithm, material } : null;
  };
}

/**
 * Whether the signature covers the key: only a key read from a body the MAC covers. No preset signs a key header,
 * and a token scheme signs nothing at all.
 */
function keySigned(spec: PresetSpec): boolean {
  return spec.algorithm !== "token" && spec.signs.includes("body") && spec.eventKey?.header === undefined;
}

export function presetAdapter(spec: PresetSpec): ProviderAdapter {
  return signedAdapter({
    provider: spec.provider,
    keptHeaders: spec.keptHeaders,
    defaultToleranceSeconds: spec.toleranceSeconds,
    read: presetRead(spec),
    keyFor: presetKey(spec),
    validateOptions(options) {
      const url = options.public_url;
      return url === undefined || (typeof url === "string" && /^https?:\/\/[^\s]+$/.test(url))
        ? []
        : ["public_url must be the full http(s) URL registered with the sender"];
    },
    async identify({ input, timestampAgeSeconds }) {
      const payload = parseJsonBody(input.rawBody);
      const described = describePayload(payload, input.options, {
        subject: spec.subjectPath,
        occurredAt: spec.occurredAtPath,
      });
      let headerOrPathType = located(input, payload, spec.type);
      if (spec.type?.join && headerOrPathType) {
        const suffix = stringAtPath(payload, spec.type.join);
        if (suffix) headerOrPathType = `${headerOrPathType}.${suffix}`;
      }
      return event(
        {
          ...(await eventKeyOf(located(input, payload, spec.eventKey), input.rawBody, { signed: keySigned(spec) })),
          ...described,
          eventType: optionString(input.options, "type_path") ? described.eventType : headerOrPathType,
          annotations: annotationsFrom(
            Object.fromEntries((spec.annotations ?? []).map((name) => [name, readHeader(input.headers, name)])),
          ),
        },
        timestampAgeSeconds,
      );
    },
  });
}

/** Every sender written as a preset. Each entry's doc section in docs/providers.md says the same in words. */
export const presets: readonly PresetSpec[] = [
  {
    provider: "hubspot",
    signatureHeader: "x-hubspot-signature-v3",
    algorithm: "hmac-sha256",
    encoding: "base64",
    timestampHeader: "x-hubspot-request-timestamp",
    timestampFormat: "unix-ms",
    toleranceSeconds: 300,
    signs: ["method", "url", "body", "timestamp"],
    // HubSpot's v3 rule: these encodings in the request URI are decoded before signing, no others.
    urlDecodes: [":", "/", "?", "@", "!", "$", "'", "(", ")", "*", ",", ";"],
    type: { path: "0.subscriptionType" },
    subjectPath: "0.objectId",
    occurredAtPath: "0.occurredAt",
    keptHeaders: ["x-hubspot-request-timestamp", "content-type", "user-agent"],
  },
  {
    provider: "zendesk",
    signatureHeader: "x-zendesk-webhook-signature",
    algorithm: "hmac-sha256",
    encoding: "base64",
    timestampHeader: "x-zendesk-webhook-signature-timestamp",
    timestampFormat: "rfc3339",
    toleranceSeconds: 300,
    signs: ["timestamp", "body"],
    eventKey: { header: "x-zendesk-webhook-invocation-id" },
    type: { path: "type" },
    subjectPath: "detail.id",
    occurredAtPath: "time",
    keptHeaders: [
      "x-zendesk-webhook-id",
      "x-zendesk-webhook-invocation-id",
      "x-zendesk-webhook-signature-timestamp",
      "user-agent",
    ],
  },
  {
    provider: "woocommerce",
    signatureHeader: "x-wc-webhook-signature",
    algorithm: "hmac-sha256",
    encoding: "base64",
    signs: ["body"],
    eventKey: { header: "x-wc-webhook-delivery-id" },
    type: { header: "x-wc-webhook-topic" },
    subjectPath: "id",
    keptHeaders: [
      "x-wc-webhook-delivery-id",
      "x-wc-webhook-id",
      "x-wc-webhook-topic",
      "x-wc-webhook-resource",
      "x-wc-webhook-event",
      "x-wc-webhook-source",
    ],
  },
  {
    provider: "typeform",
    signatureHeader: "typeform-signature",
    algorithm: "hmac-sha256",
    encoding: "base64",
    prefix: "sha256=",
    signs: ["body"],
    eventKey: { path: "event_id" },
    type: { path: "event_type" },
    subjectPath: "form_response.token",
    occurredAtPath: "form_response.submitted_at",
    keptHeaders: ["content-type", "user-agent"],
  },
  {
    provider: "calendly",
    signatureHeader: "calendly-webhook-signature",
    algorithm: "hmac-sha256",
    encoding: "hex",
    list: { entries: ",", pair: "=", signature: "v1", timestamp: "t" },
    toleranceSeconds: 180,
    signs: ["timestamp", { literal: "." }, "body"],
    type: { path: "event" },
    subjectPath: "payload.uri",
    occurredAtPath: "created_at",
    keptHeaders: ["content-type", "user-agent"],
  },
  {
    provider: "vercel",
    signatureHeader: "x-vercel-signature",
    algorithm: "hmac-sha1",
    encoding: "hex",
    signs: ["body"],
    eventKey: { path: "id" },
    type: { path: "type" },
    subjectPath: "payload.deployment.id",
    occurredAtPath: "createdAt",
    keptHeaders: ["content-type", "user-agent"],
  },
  {
    provider: "sentry",
    signatureHeader: "sentry-hook-signature",
    algorithm: "hmac-sha256",
    encoding: "hex",
    signs: ["body"],
    eventKey: { header: "request-id" },
    type: { header: "sentry-hook-resource", join: "action" },
    subjectPath: "data.issue.id",
    keptHeaders: ["request-id", "sentry-hook-resource", "sentry-hook-timestamp", "user-agent"],
  },
  {
    provider: "mux",
    signatureHeader: "mux-signature",
    algorithm: "hmac-sha256",
    encoding: "hex",
    list: { entries: ",", pair: "=", signature: "v1", timestamp: "t" },
    toleranceSeconds: 300,
    signs: ["timestamp", { literal: "." }, "body"],
    eventKey: { path: "id" },
    type: { path: "type" },
    subjectPath: "object.id",
    occurredAtPath: "created_at",
    keptHeaders: ["content-type", "user-agent"],
  },
  {
    provider: "pagerduty",
    signatureHeader: "x-pagerduty-signature",
    algorithm: "hmac-sha256",
    encoding: "hex",
    list: { entries: ",", pair: "=", signature: "v1" },
    signs: ["body"],
    eventKey: { path: "event.id" },
    type: { path: "event.event_type" },
    subjectPath: "event.data.id",
    occurredAtPath: "event.occurred_at",
    keptHeaders: ["x-webhook-id", "x-webhook-subscription", "content-type", "user-agent"],
  },
  {
    provider: "lemonsqueezy",
    signatureHeader: "x-signature",
    algorithm: "hmac-sha256",
    encoding: "hex",
    signs: ["body"],
    type: { header: "x-event-name" },
    subjectPath: "data.id",
    keptHeaders: ["x-event-name", "content-type", "user-agent"],
  },
  {
    provider: "razorpay",
    signatureHeader: "x-razorpay-signature",
    algorithm: "hmac-sha256",
    encoding: "hex",
    signs: ["body"],
    eventKey: { header: "x-razorpay-event-id" },
    type: { path: "event" },
    subjectPath: "account_id",
    occurredAtPath: "created_at",
    keptHeaders: ["x-razorpay-event-id", "content-type", "user-agent"],
  },
  {
    provider: "coinbase-commerce",
    signatureHeader: "x-cc-webhook-signature",
    algorithm: "hmac-sha256",
    encoding: "hex",
    signs: ["body"],
    eventKey: { path: "event.id" },
    type: { path: "event.type" },
    subjectPath: "event.data.id",
    occurredAtPath: "event.created_at",
    keptHeaders: ["content-type", "user-agent"],
  },
  {
    provider: "bitbucket",
    signatureHeader: "x-hub-signature",
    algorithm: "hmac-sha256",
    encoding: "hex",
    prefix: "sha256=",
    signs: ["body"],
    eventKey: { header: "x-request-uuid" },
    type: { header: "x-event-key" },
    subjectPath: "repository.uuid",
    keptHeaders: ["x-request-uuid", "x-event-key", "x-hook-uuid", "x-attempt-number", "user-agent"],
    annotations: ["x-attempt-number"],
  },
  {
    provider: "box",
    signatureHeader: ["box-signature-primary", "box-signature-secondary"],
    algorithm: "hmac-sha256",
    encoding: "base64",
    timestampHeader: "box-delivery-timestamp",
    timestampFormat: "rfc3339",
    toleranceSeconds: 600,
    signs: ["body", "timestamp"],
    eventKey: { header: "box-delivery-id" },
    type: { path: "trigger" },
    subjectPath: "source.id",
    occurredAtPath: "created_at",
    keptHeaders: ["box-delivery-id", "box-delivery-timestamp", "user-agent"],
  },
  {
    provider: "docusign",
    signatureHeader: ["x-docusign-signature-1", "x-docusign-signature-2", "x-docusign-signature-3"],
    algorithm: "hmac-sha256",
    encoding: "base64",
    signs: ["body"],
    type: { path: "event" },
    subjectPath: "data.envelopeId",
    occurredAtPath: "generatedDateTime",
    keptHeaders: ["content-type", "user-agent"],
  },
  {
    provider: "dropbox",
    signatureHeader: "x-dropbox-signature",
    algorithm: "hmac-sha256",
    encoding: "hex",
    signs: ["body"],
    keptHeaders: ["content-type", "user-agent"],
  },
  {
    provider: "telegram",
    signatureHeader: "x-telegram-bot-api-secret-token",
    algorithm: "token",
    encoding: "hex",
    signs: [],
    eventKey: { path: "update_id" },
    type: { otherKeyThan: "update_id" },
    keptHeaders: ["content-type"],
  },
  {
    provider: "postmark",
    signatureHeader: "authorization",
    algorithm: "token",
    basicAuth: true,
    encoding: "hex",
    signs: [],
    type: { path: "RecordType" },
    subjectPath: "MessageID",
    keptHeaders: ["content-type", "user-agent"],
  },
];

export const presetAdapters: readonly ProviderAdapter[] = presets.map(presetAdapter);
export const presetByName = (name: string) => presetAdapters.find((adapter) => adapter.provider === name)!;
