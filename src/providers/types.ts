/**
 * One small interface every sender's scheme sits behind. An adapter is pure: it sees the exact bytes received,
 * the headers, the URL, the source's usable secrets and the clock, and says what the delivery is. It never
 * touches storage, so "verify before anything is written" holds by construction. The one I/O an adapter may do is
 * fetch a key its sender publishes, from the sender's pinned hosts only (src/providers/key-fetch.ts).
 */
import type { SignedContentDigest } from "../model/claims";
import type { ProviderOptions } from "./option-keys";

/** A secret as the source config names it, already resolved from the Worker's secrets and not yet expired. */
export interface SourceSecret {
  name: string;
  value: string;
}

export interface DeliveryInput {
  /** The source's name: what per-source limits (key fetches in flight) count against. Absent in direct adapter tests. */
  source?: string;
  /** POST for deliveries; GET only reaches adapters that list it in `methods` (challenge handshakes). Absent: POST. */
  method?: "GET" | "POST";
  rawBody: Uint8Array;
  headers: Headers;
  /** The full URL the sender called (Twilio and Square sign it). */
  url: string;
  secrets: readonly SourceSecret[];
  /** Epoch milliseconds; injected so tolerance windows are testable. */
  now: number;
  /** The source's table from wrangler.toml, for adapters that read options (tolerance, JSON paths, …). */
  options: ProviderOptions;
  /**
   * How long the source remembers a key (its `dedupe_retention`, resolved with its default by src/sources/config.ts):
   * a sender whose signed time is the only thing telling a replay from a new event refuses anything older, since
   * past this a captured copy would be new again (src/providers/aws-sns.ts). Absent only when a test calls an
   * adapter directly.
   */
  dedupeRetentionMs?: number;
  /**
   * The values of the Worker secrets the source's `verify_token` option names: what proves a challenge handshake
   * that carries no signature of its own (Meta's `hub.verify_token`, a `?verify_token=` in a registered URL).
   */
  verifyTokens?: readonly SourceSecret[];
  /**
   * Secrets the sender handed over in an earlier, proven handshake and the receiver kept (Asana's X-Hook-Secret,
   * Notion's verification_token), newest first. Only for adapters with `keptSecrets`.
   */
  keptSecrets?: readonly SourceSecret[];
}

/** What a verified delivery is, in the provider's own documented terms. */
export interface EventIdentity {
  /** The id the provider documents as stable across its retries; scoped by source when claimed. */
  eventKey: string;
  /** Where eventKey came from. "payload-sha256" only for providers that give no id, and it says so. */
  eventKeyOrigin: "provider-id" | "payload-sha256";
  /**
   * Whether the signature covers eventKey (a payload-sha256 key trivially is). When it does not (an unsigned
   * header such as X-GitHub-Delivery, a key in a body no signature covers), a replay of the signed content under a
   * new key must still be a duplicate: the claim shard then dedupes on the payload's SHA-256 (src/model/claims.ts).
   */
  eventKeySigned: boolean;
  /**
   * For a scheme that does not sign the body's bytes as received (Twilio's sorted parameters, monday.com's JWT):
   * the SHA-256 of the canonical form its signature covers, and whether that form fixes the body. An unsigned key
   * is then claimed under this digest instead of the payload's hash (src/model/claims.ts claimKeyOf), so every
   * spelling of one signed form, or every body under one token, meets in one claim.
   */
  signedContent?: SignedContentDigest;
  eventType: string | null;
  /** The object the event is about (account, invoice, repository, …), when the provider names one. */
  subjectId: string | null;
  /** A per-object version or sequence the provider supplies; never invented from arrival order. */
  version: number | null;
  /** When the provider says the event happened (epoch ms), if it says. */
  occurredAt: number | null;
  /** Correlation ids and retry counters worth keeping (e.g. X-Shopify-Event-Id, X-Slack-Retry-Num). */
  annotations?: Record<string, string>;
}

export type RejectReason =
  | "missing-signature"
  | "malformed-signature"
  | "signature-mismatch"
  | "timestamp-out-of-tolerance"
  | "no-usable-secret"
  | "malformed-payload"
  /** A body read before verification (a form, or JSON carrying its own signature) over src/providers/unverified.ts's limits. */
  | "payload-over-limits"
  /** More signatures × secrets × signed contents than one request may make us check. */
  | "verification-over-budget"
  /**
   * A scheme that signs the URL and the body back to back, called at a URL whose query could trade bytes with the
   * body under one signature (src/providers/presets.ts): the source must name the URL it registered (`public_url`).
   */
  | "ambiguous-signed-url";

/**
 * How the sender needs an accepted (or duplicate) delivery answered, for senders that read the answer: Discord
 * interactions need an interaction response, Discord webhook events a bare 204, Adyen the text `[accepted]`,
 * Twilio TwiML. Absent, the receiver answers its own {"status", "receipt"}. Either way the answer is sent only
 * once the claim is durable.
 */
export interface Acknowledgement {
  status: 200 | 201 | 202 | 204;
  /** A JSON body; none with 204. */
  json?: unknown;
  /** A text body (used when `json` is absent); none with 204. */
  text?: string;
  /** The text body's content type; `text/plain; charset=utf-8` when absent. */
  contentType?: string;
}

/** One event of a delivery that carries several: what it is, and the bytes its receipt keeps. */
export interface CarriedEvent {
  identity: EventIdentity;
  storedBody?: Uint8Array;
}

export type VerifyResult =
  | {
      kind: "event";
      identity: EventIdentity;
      /**
       * Which secret verified it: the listed secret's Worker binding name, or a kept secret's `kept:<fingerprint>`
       * (src/ingest/kept-secret-reads.ts); never a value. Absent where no secret of ours decides (Plaid checks a key
       * its API hands out), so the verification health counts it unattributed (docs/operating.md).
       */
      verifiedBy?: string;
      /** seconds between the signed timestamp and now */
      timestampAgeSeconds?: number;
      acknowledgement?: Acknowledgement;
      /**
       * The bytes to keep, show and forward in place of the received ones, for a sender whose body carries the
       * source's secret (Graph's `clientState`): the receiver never keeps a secret. Or the part of the body the
       * signature covers, for a sender whose body carries unsigned fields beside it (SNS): nothing unsigned is kept
       * as genuine. Hashed and claimed as received, so copies differing only outside it are one event.
       */
      storedBody?: Uint8Array;
      /**
       * A delivery that carries several events, each signed on its own (Adyen's notificationItems): every one is
       * claimed under its own key, and the answer waits until every claim is durable. It lists them all, the first
       * being `identity` and `storedBody` above; absent, the delivery is that one event.
       */
      events?: readonly CarriedEvent[];
    }
  /**
   * A proven handshake (Slack url_verification, Zoom url_validation, Twitch challenge, Meta's GET hub.challenge):
   * answered, never claimed. `keepSecret` is a secret the sender handed over in it (Asana's X-Hook-Secret), which
   * the route stores before answering, so later deliveries verify against it.
   */
  | { kind: "handshake"; response: Response; keepSecret?: string }
  /** The reason is for logs and metrics only; the HTTP answer never says which part failed. */
  | { kind: "rejected"; reason: RejectReason }
  /**
   * The key or certificate the delivery must be checked with could not be fetched (src/providers/key-fetch.ts):
   * neither accepted nor refused, answered 503 so the sender retries. The reason is for logs only.
   */
  | { kind: "unavailable"; reason: string };

export interface ProviderAdapter {
  /** The `provider = "…"` value in wrangler.toml. */
  readonly provider: string;
  /** Lower-case header names kept with the receipt. Signature headers are never kept. */
  readonly keptHeaders: readonly string[];
  verify(input: DeliveryInput): Promise<VerifyResult>;
  /** Methods the route passes to this adapter; POST when absent. GET is only for challenge handshakes. */
  readonly methods?: readonly ("GET" | "POST")[];
  /** The sender hands its signing secret over in a handshake: the route loads kept ones into `keptSecrets`. */
  readonly keptSecrets?: boolean;
  /** Deploy-time validation of the source's options: a list of problems, empty when fine. */
  validateOptions?(options: ProviderOptions): string[];
}

/**
 * A source's raw table from wrangler.toml `[vars.SOURCES.<name>]`. Adapter-specific keys live here too; an adapter
 * reads them through ProviderOptions (./option-keys.ts).
 */
export type SourceOptions = Readonly<Record<string, unknown>>;
export type { ProviderOptions } from "./option-keys";
