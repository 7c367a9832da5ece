import { sha256Hex } from "../crypto/digest";
import { concatBytes, decodeBase64, decodeBase64Url, decodeHex, utf8Bytes } from "../crypto/encoding";
import { anySignatureVerifies, isHmac, type SignatureAlgorithm, type VerificationKey } from "../crypto/verify";
import { stringAtPath, timeAtPath, versionAtPath } from "./json";
import type { ProviderOptionKey } from "./option-keys";
import type {
  DeliveryInput,
  EventIdentity,
  ProviderAdapter,
  ProviderOptions,
  RejectReason,
  SourceSecret,
  VerifyResult,
} from "./types";
import { PayloadOverLimits } from "./unverified";

/**
 * The parts every provider adapter shares, in one place: bounded header reads, signature-list parsing, strict
 * decoding, the timestamp tolerance check, the "any listed secret, any presented signature" loop, and the
 * identity fallbacks. An adapter only says where its signature, signed content and identity live.
 */

/** Longer signature or id headers than this are refused before any parsing: no sender needs more. */
export const MAX_HEADER_CHARS = 4096;
/** A signature list with more entries than this is refused rather than looped over. */
export const MAX_SIGNATURE_ENTRIES = 16;
const MAX_EVENT_KEY_CHARS = 512;
export const DEFAULT_TOLERANCE_SECONDS = 300;

/** Thrown by readHeader for an oversized header; the pipeline turns it into a "malformed-signature" rejection. */
class OversizedHeader extends Error {}

/**
 * The header's value, or null when it is absent or empty. An oversized value is refused outright (never parsed,
 * and never silently treated as absent, which would let an id header's absence change the dedupe key).
 */
export function readHeader(headers: Headers, name: string): string | null {
  const value = headers.get(name);
  if (value !== null && value.length > MAX_HEADER_CHARS) throw new OversizedHeader(name);
  return value === null || value.length === 0 ? null : value;
}

/** Runs a verification step, turning an oversized header or an unverified body over its limits into a rejection. */
export async function refusingOversized(step: () => VerifyResult | Promise<VerifyResult>): Promise<VerifyResult> {
  try {
    return await step();
  } catch (error) {
    if (error instanceof OversizedHeader) return rejected("malformed-signature");
    if (error instanceof PayloadOverLimits) return rejected("payload-over-limits");
    throw error;
  }
}

/**
 * The non-empty, trimmed entries of a separated header value, or null when there are none or more than `max`.
 * Stops at the first entry over `max` rather than splitting the whole value first.
 */
export function boundedEntries(header: string, separator: string, max = MAX_SIGNATURE_ENTRIES): string[] | null {
  if (separator.length === 0) return header.trim().length > 0 ? [header.trim()] : null;
  const entries: string[] = [];
  for (let start = 0; start <= header.length; ) {
    const end = header.indexOf(separator, start);
    const entry = header.slice(start, end === -1 ? header.length : end).trim();
    if (entry.length > 0 && entries.push(entry) > max) return null;
    if (end === -1) break;
    start = end + separator.length;
  }
  return entries.length > 0 ? entries : null;
}

/**
 * Splits `t=1,v1=ab,v1=cd` (Stripe), `ts=1;h1=ab` (Paddle) or `v1,ab v1a,cd` (Standard Webhooks) into
 * [name, value] pairs. Entries without the separator are skipped, not fatal; too many entries is null.
 */
export function parseSignatureList(
  header: string,
  entrySeparator: string,
  pairSeparator: string,
): Array<[string, string]> | null {
  const entries = boundedEntries(header, entrySeparator);
  if (!entries) return null;
  const pairs: Array<[string, string]> = [];
  for (const entry of entries) {
    const at = entry.indexOf(pairSeparator);
    if (at > 0) pairs.push([entry.slice(0, at), entry.slice(at + pairSeparator.length)]);
  }
  return pairs;
}

export type SignatureEncoding = "hex" | "base64" | "base64url";

export function decodeSignature(text: string, encoding: SignatureEncoding): Uint8Array | null {
  switch (encoding) {
    case "hex":
      return decodeHex(text);
    case "base64":
      return decodeBase64(text);
    case "base64url":
      return decodeBase64Url(text);
  }
}

/** Decodes each candidate, dropping junk entries; the caller treats an empty result as malformed. */
export function presentedSignatures(
  candidates: readonly string[],
  encoding: SignatureEncoding,
  algorithm: SignatureAlgorithm,
): PresentedSignature[] {
  const signatures: PresentedSignature[] = [];
  for (const candidate of candidates.slice(0, MAX_SIGNATURE_ENTRIES)) {
    const bytes = decodeSignature(candidate, encoding);
    if (bytes && bytes.length > 0) signatures.push({ algorithm, bytes });
  }
  return signatures;
}

/** Strict Unix seconds (or milliseconds): digits only, so "1e9", " 12" or "-5" never pass as a time. */
export function parseUnixSeconds(text: string | null | undefined, unit: "s" | "ms" = "s"): number | null {
  if (!text || !/^\d{1,15}$/.test(text)) return null;
  const value = Number(text);
  return unit === "ms" ? Math.floor(value / 1000) : value;
}

export function toleranceSeconds(options: ProviderOptions, fallback: number): number {
  const value = options.tolerance_seconds;
  return typeof value === "number" && value > 0 ? value : fallback;
}

export function optionString(options: ProviderOptions, name: ProviderOptionKey): string | undefined {
  const value = options[name];
  return typeof value === "string" && value.length > 0 ? value : undefined;
}

export interface PresentedSignature {
  algorithm: SignatureAlgorithm;
  bytes: Uint8Array;
}

/** What the sender presented: its signatures, the exact bytes they cover, and when it signed (if the scheme says). */
export interface Presented {
  signatures: PresentedSignature[];
  signedContent: Uint8Array;
  /** Other spellings of the same content the sender may have signed (Twilio's URL with or without its port). */
  alsoSigned?: readonly Uint8Array[];
  /** Unix seconds the sender signed at, for schemes that sign a time; checked against the tolerance. */
  signedAt?: number;
}

export interface VerifiedDelivery {
  input: DeliveryInput;
  presented: Presented;
  /** The listed secret that verified this delivery (handshakes answer with it). */
  secret: SourceSecret;
  timestampAgeSeconds: number | undefined;
}

export interface SignedScheme {
  provider: string;
  keptHeaders: readonly string[];
  /** Tolerance used when the scheme signs a time and the source sets no `tolerance_seconds`. */
  defaultToleranceSeconds?: number;
  /** Reads the presented signatures and signed content; a reason string rejects. Never trusts what it reads. */
  read(input: DeliveryInput): Presented | RejectReason | Promise<Presented | RejectReason>;
  /**
   * How a listed secret verifies this scheme; null for a secret in the wrong shape (it then verifies nothing).
   * Several keys when one secret may sign with several algorithms (Twilio's SHA-1 and SHA-256 rules).
   */
  keyFor(secret: string, options: ProviderOptions): VerificationKey | readonly VerificationKey[] | null;
  /** Runs only after verification: the event's identity, or the handshake answer. */
  identify(delivery: VerifiedDelivery): VerifyResult | Promise<VerifyResult>;
  validateOptions?(options: ProviderOptions): string[];
}

/**
 * The most signature checks one request may cost: an HMAC over the body per (key, signed content), or one
 * public-key verification per (key, presented signature, signed content). The caller need not be authenticated,
 * so this is what bounds the CPU a forged request can burn; a rotation (a few secrets) over one or two signed
 * contents stays far below it.
 */
export const MAX_VERIFICATION_STEPS = 16;

interface Candidate {
  secret: SourceSecret;
  key: VerificationKey;
  signatures: Uint8Array[];
}

/** Every listed secret's key(s), each with the presented signatures of its algorithm; keys nothing presented for are dropped. */
function candidatesFor(input: DeliveryInput, scheme: SignedScheme, presented: Presented): Candidate[] {
  const candidates: Candidate[] = [];
  for (const secret of input.secrets) {
    const keys = scheme.keyFor(secret.value, input.options) ?? [];
    for (const key of Array.isArray(keys) ? keys : [keys as VerificationKey]) {
      const signatures = presented.signatures
        .filter((signature) => signature.algorithm === key.algorithm)
        .map((signature) => signature.bytes);
      if (signatures.length > 0) candidates.push({ secret, key, signatures });
    }
  }
  return candidates;
}

/** How many MACs or public-key verifications checking these candidates over `contents` signed contents costs at most. */
export function verificationSteps(
  candidates: readonly { key: VerificationKey; signatures: readonly unknown[] }[],
  contents: number,
): number {
  return candidates.reduce(
    (steps, { key, signatures }) => steps + contents * (isHmac(key.algorithm) ? 1 : signatures.length),
    0,
  );
}

async function verifiedBy(
  input: DeliveryInput,
  scheme: SignedScheme,
  presented: Presented,
): Promise<SourceSecret | null | "over-budget"> {
  const contents = [presented.signedContent, ...(presented.alsoSigned ?? [])];
  const candidates = candidatesFor(input, scheme, presented);
  if (verificationSteps(candidates, contents.length) > MAX_VERIFICATION_STEPS) return "over-budget";
  for (const { secret, key, signatures } of candidates) {
    for (const content of contents) {
      if (await anySignatureVerifies(key, signatures, content)) return secret;
    }
  }
  return null;
}

export function rejected(reason: RejectReason): VerifyResult {
  return { kind: "rejected", reason };
}

/** Builds an adapter from a scheme: read → tolerance → verify against every usable secret → identify. */
export function signedAdapter(scheme: SignedScheme): ProviderAdapter {
  return {
    provider: scheme.provider,
    keptHeaders: scheme.keptHeaders,
    validateOptions: scheme.validateOptions,
    verify: (input: DeliveryInput) => refusingOversized(() => verifySigned(scheme, input)),
  };
}

async function verifySigned(scheme: SignedScheme, input: DeliveryInput): Promise<VerifyResult> {
  if (input.secrets.length === 0) return rejected("no-usable-secret");
  const presented = await scheme.read(input);
  if (typeof presented === "string") return rejected(presented);
  if (presented.signatures.length === 0) return rejected("malformed-signature");

  let timestampAgeSeconds: number | undefined;
  if (presented.signedAt !== undefined) {
    timestampAgeSeconds = Math.floor(input.now / 1000) - presented.signedAt;
    const tolerance = toleranceSeconds(input.options, scheme.defaultToleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS);
    if (Math.abs(timestampAgeSeconds) > tolerance) return rejected("timestamp-out-of-tolerance");
  }

  const secret = await verifiedBy(input, scheme, presented);
  if (secret === "over-budget") return rejected("verification-over-budget");
  if (!secret) return rejected("signature-mismatch");

  const identified = await scheme.identify({ input, presented, secret, timestampAgeSeconds });
  if (identified.kind !== "event") return identified;
  const result = { ...identified, verifiedBy: secret.name };
  const { identity } = result;
  if (identity.eventKey.length > MAX_EVENT_KEY_CHARS) return rejected("malformed-payload");
  if (identity.eventKeyOrigin === "payload-sha256") {
    // Said where the receipt is looked at, not only in memory: this key treats a changed resend as a new event.
    return {
      ...result,
      identity: { ...identity, annotations: { ...identity.annotations, "event-key-origin": "payload-sha256" } },
    };
  }
  return result;
}

/** Where a payload's identity lives, as dotted JSON paths; a source's `*_path` options override each one. */
export interface PayloadPaths {
  type?: string;
  subject?: string;
  version?: string;
  occurredAt?: string;
}

export function describePayload(payload: unknown, options: ProviderOptions, defaults: PayloadPaths) {
  return {
    eventType: stringAtPath(payload, optionString(options, "type_path") ?? defaults.type),
    subjectId: stringAtPath(payload, optionString(options, "subject_path") ?? defaults.subject),
    version: versionAtPath(payload, optionString(options, "version_path") ?? defaults.version),
    occurredAt: timeAtPath(payload, optionString(options, "occurred_at_path") ?? defaults.occurredAt),
  };
}

/** A type the provider sends in a header (X-GitHub-Event, X-Shopify-Topic…), unless the source set `type_path`. */
export function headerTypeUnlessConfigured(
  options: ProviderOptions,
  describedType: string | null,
  headerType: string | null,
): string | null {
  return optionString(options, "type_path") ? describedType : headerType;
}

type EventKey = Pick<EventIdentity, "eventKey" | "eventKeyOrigin" | "eventKeySigned">;

/**
 * The provider's own id when it gave one; otherwise the payload's SHA-256, and eventKeyOrigin says so.
 * Only for providers (or deliveries) that carry no id: a hash key treats a changed resend as a new event.
 * `coverage.signed` says whether the scheme's signature covers the id (a payload hash is covered by definition).
 */
export async function eventKeyOf(providerId: null, rawBody: Uint8Array): Promise<EventKey>;
export async function eventKeyOf(
  providerId: string | null | undefined,
  rawBody: Uint8Array,
  coverage: { signed: boolean },
): Promise<EventKey>;
export async function eventKeyOf(
  providerId: string | null | undefined,
  rawBody: Uint8Array,
  coverage?: { signed: boolean },
): Promise<EventKey> {
  if (providerId && coverage)
    return { eventKey: providerId, eventKeyOrigin: "provider-id", eventKeySigned: coverage.signed };
  return { eventKey: await sha256Hex(rawBody), eventKeyOrigin: "payload-sha256", eventKeySigned: true };
}

/**
 * The key of a scheme whose signature covers a canonical form rather than the body's bytes (Twilio's sorted
 * parameters, monday.com's JWT): the provider's id when it gave one, else the payload's SHA-256, and either way
 * unsigned, since neither is what the signature covers, so the claim goes under the form's digest (claimKeyOf).
 */
export async function signedFormKeyOf(
  providerId: string | null | undefined,
  rawBody: Uint8Array,
  signedContent: NonNullable<EventIdentity["signedContent"]>,
): Promise<EventKey & Pick<EventIdentity, "signedContent">> {
  return { ...(await eventKeyOf(providerId, rawBody, { signed: false })), eventKeySigned: false, signedContent };
}

/** Drops empty values so annotations only carry what the sender actually sent. */
export function annotationsFrom(
  entries: Record<string, string | null | undefined>,
): Record<string, string> | undefined {
  const kept: Record<string, string> = {};
  for (const [name, value] of Object.entries(entries)) {
    if (value) kept[name] = value.slice(0, 256);
  }
  return Object.keys(kept).length > 0 ? kept : undefined;
}

export function event(identity: EventIdentity, timestampAgeSeconds?: number): VerifyResult {
  return { kind: "event", identity, timestampAgeSeconds };
}

export function utf8Key(algorithm: SignatureAlgorithm) {
  const encoder = new TextEncoder();
  return (secret: string): VerificationKey => ({ algorithm, material: encoder.encode(secret) });
}

/** Schemes that sign the raw body alone, with one signature in one header (GitHub, Shopify, Intercom, Linear…). */
export function bodySignature(header: string, encoding: SignatureEncoding, algorithm: SignatureAlgorithm, prefix = "") {
  return (input: DeliveryInput): Presented | RejectReason => {
    const value = readHeader(input.headers, header);
    if (!value) return "missing-signature";
    if (!value.startsWith(prefix)) return "malformed-signature";
    return {
      signatures: presentedSignatures([value.slice(prefix.length)], encoding, algorithm),
      signedContent: input.rawBody,
    };
  };
}

/**
 * The `v0=<hex>` scheme Slack and Zoom share: HMAC-SHA256 over `v0:${timestamp}:${body}`, the signature and the
 * timestamp each in a header of the provider's naming.
 */
export function v0TimestampedSignature(signatureHeader: string, timestampHeader: string) {
  return ({ headers, rawBody }: DeliveryInput): Presented | RejectReason => {
    const signature = readHeader(headers, signatureHeader);
    const timestampText = readHeader(headers, timestampHeader);
    if (!signature || !timestampText) return "missing-signature";
    const signedAt = parseUnixSeconds(timestampText);
    if (signedAt === null || !signature.startsWith("v0=")) return "malformed-signature";
    return {
      signatures: presentedSignatures([signature.slice(3)], "hex", "hmac-sha256"),
      signedAt,
      signedContent: concatBytes(utf8Bytes(`v0:${timestampText}:`), rawBody),
    };
  };
}
