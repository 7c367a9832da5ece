export type Provenance = "live" | "reconciled" | "replayed";

/** What is known of an event at every stage — the shard, D1, the consumer, a handler — named the same in each. */
export interface EventFacts {
  source: string;
  eventKey: string;
  eventType: string | null;
  subjectId: string | null;
  version: number | null;
  occurredAt: number | null;
}

/** Everything the shard stores for a new event: verified identity plus the exact bytes received. */
export interface ClaimRequest extends EventFacts {
  payloadSha256: string;
  /** Whether the sender's signature covers eventKey (EventIdentity.eventKeySigned): it decides the claim key. */
  eventKeySigned: boolean;
  body: Uint8Array;
  /** JSON object of kept headers (never signature headers). */
  keptHeaders: string;
  receivedAt: number;
  provenance: Provenance;
}

/**
 * The key a claim is routed and deduped by. A signed key is the event key itself. A key the signature does not
 * cover (X-GitHub-Delivery, X-Shopify-Webhook-Id, …) proves nothing about freshness: anyone holding one captured
 * delivery can resend its signed bytes under a new one. Such claims are keyed by the payload's SHA-256 instead, so
 * every copy of the same signed content meets in one shard's synchronous transaction whatever key it carries
 * (Invariant 9). The event key still names the receipt in D1, whose UNIQUE (source, event_key) then catches the same
 * key with other bytes at relay time. A payload-sha256 key is its own hash, so it lands where an unsigned key would.
 */
export function claimKeyOf(claim: Pick<ClaimRequest, "eventKey" | "eventKeySigned" | "payloadSha256">): string {
  return claim.eventKeySigned ? claim.eventKey : claim.payloadSha256;
}

export type ClaimDisposition = "accepted" | "duplicate" | "quarantined";

export interface ClaimResult {
  disposition: ClaimDisposition;
  /** The receipt this key belongs to: the new one when accepted, the original otherwise. */
  receiptId: string;
}

/** A claim the shard has accepted but not yet relayed into D1. */
export interface PendingClaim extends EventFacts {
  /** The key the shard holds it under (claimKeyOf): the event key, or the payload hash for an unsigned key. */
  claimKey: string;
  receiptId: string;
  payloadSha256: string;
  body: ArrayBuffer | null;
  keptHeaders: string | null;
  receivedAt: number;
  provenance: Provenance;
}

export interface PendingQuarantine {
  quarantineId: string;
  source: string;
  eventKey: string;
  originalReceiptId: string;
  originalSha256: string;
  payloadSha256: string;
  body: ArrayBuffer | null;
  keptHeaders: string | null;
  receivedAt: number;
}

export interface RelayReport {
  receiptsRelayed: number;
  quarantinesRelayed: number;
  /** Keys D1 already held under another receipt (e.g. after a shard-count change): never enqueued twice. */
  duplicatesCaughtByD1: number;
  remaining: number;
}
