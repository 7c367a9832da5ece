/**
 * One small interface every sender's scheme sits behind. An adapter is pure: it sees the exact bytes received,
 * the headers, the URL, the source's usable secrets and the clock, and says what the delivery is. It never
 * touches storage, so "verify before anything is written" holds by construction.
 */

/** A secret as the source config names it, already resolved from the Worker's secrets and not yet expired. */
export interface SourceSecret {
  name: string;
  value: string;
}

export interface DeliveryInput {
  rawBody: Uint8Array;
  headers: Headers;
  /** The full URL the sender called (Twilio and Square sign it). */
  url: string;
  secrets: readonly SourceSecret[];
  /** Epoch milliseconds; injected so tolerance windows are testable. */
  now: number;
  /** The source's table from wrangler.toml, for adapters that read options (tolerance, JSON paths, …). */
  options: SourceOptions;
}

/** What a verified delivery is, in the provider's own documented terms. */
export interface EventIdentity {
  /** The id the provider documents as stable across its retries; scoped by source when claimed. */
  eventKey: string;
  /** Where eventKey came from. "payload-sha256" only for providers that give no id, and it says so. */
  eventKeyOrigin: "provider-id" | "payload-sha256";
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
  /** More signatures × secrets × signed contents than one request may make us check. */
  | "verification-over-budget";

/**
 * How the sender needs an accepted (or duplicate) delivery answered, for senders that read the answer: Discord
 * interactions need an interaction response, Discord webhook events a bare 204. Absent, the receiver answers its
 * own {"status", "receipt"}. Either way the answer is sent only once the claim is durable.
 */
export interface Acknowledgement {
  status: 200 | 204;
  /** The JSON body; none with 204. */
  json?: unknown;
}

export type VerifyResult =
  | {
      kind: "event";
      identity: EventIdentity;
      /** seconds between the signed timestamp and now */
      timestampAgeSeconds?: number;
      acknowledgement?: Acknowledgement;
    }
  /** A verified handshake (Slack url_verification, Zoom url_validation, Twitch challenge): answered, never claimed. */
  | { kind: "handshake"; response: Response }
  /** The reason is for logs and metrics only; the HTTP answer never says which part failed. */
  | { kind: "rejected"; reason: RejectReason };

export interface ProviderAdapter {
  /** The `provider = "…"` value in wrangler.toml. */
  readonly provider: string;
  /** Lower-case header names kept with the receipt. Signature headers are never kept. */
  readonly keptHeaders: readonly string[];
  verify(input: DeliveryInput): Promise<VerifyResult>;
  /** Deploy-time validation of the source's options: a list of problems, empty when fine. */
  validateOptions?(options: SourceOptions): string[];
}

/** A source's raw table from wrangler.toml `[vars.SOURCES.<name>]`. Adapter-specific keys live here too. */
export type SourceOptions = Readonly<Record<string, unknown>>;
