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

/**
 * The SHA-256 of the canonical form of what a signature covers, for a scheme that does not sign the body's bytes as
 * received: Twilio's URL plus sorted parameters, monday.com's JWT. `coversBody` says whether that form fixes the
 * event's content (Twilio: reordered or re-encoded parameters are the same form, so the same event) or not
 * (monday.com: the token says nothing about the body, so other bytes under one token are a violation).
 */
export interface SignedContentDigest {
  sha256: string;
  coversBody: boolean;
}

/** Everything the shard stores for a new event: verified identity plus the exact bytes received. */
export interface ClaimRequest extends EventFacts {
  payloadSha256: string;
  /** Whether the sender's signature covers eventKey (EventIdentity.eventKeySigned): it decides the claim key. */
  eventKeySigned: boolean;
  /** EventIdentity.signedContent: what an unsigned key is claimed under in place of the payload hash. */
  signedContent?: SignedContentDigest;
  body: Uint8Array;
  /** JSON object of kept headers (never signature headers). */
  keptHeaders: string;
  receivedAt: number;
  provenance: Provenance;
  /**
   * The secret that verified the delivery, sent only when the source had several to choose from: the shard stamps
   * its last use at most once an hour (src/claims/secret-use.ts). Its name, never its value.
   */
  verifiedBy?: string;
}

/**
 * The key a claim is routed and deduped by: a function of exactly what the signature covers (Invariant 9). A signed
 * key is the event key itself. A key the signature does not cover (X-GitHub-Delivery, I-Twilio-Idempotency-Token,
 * monday.com's triggerUuid, …) proves nothing about freshness: anyone holding one captured delivery can resend its
 * signed content under a new one. Such claims are keyed by the digest of the signed content instead, so every copy
 * meets in one shard's synchronous transaction whatever key it carries: the payload's SHA-256 where the body is
 * what is signed, the adapter's canonical digest where it is not (Twilio signs sorted parameters, so a reordered
 * body is the same content; monday.com signs a token, so one token is one claim). The event key still names the
 * receipt in D1, whose UNIQUE (source, event_key) then catches the same key with other bytes at relay time.
 */
export function claimKeyOf(
  claim: Pick<ClaimRequest, "eventKey" | "eventKeySigned" | "payloadSha256" | "signedContent">,
): string {
  if (claim.eventKeySigned) return claim.eventKey;
  return claim.signedContent?.sha256 ?? claim.payloadSha256;
}

/**
 * Whether the claim key is itself a digest of the event's whole content (the payload hash, or a signed form that
 * fixes the body): then a second copy under it is the same event whatever its bytes, a duplicate, never a
 * quarantine. Otherwise (a signed event key, a token's digest) the shard compares the bytes.
 */
export function claimKeyFixesContent(
  claim: Pick<ClaimRequest, "eventKey" | "eventKeySigned" | "payloadSha256" | "signedContent">,
): boolean {
  const claimKey = claimKeyOf(claim);
  return (
    claimKey === claim.payloadSha256 ||
    (claim.signedContent?.coversBody === true && claimKey === claim.signedContent.sha256)
  );
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
  /**
   * The deliveries it stands for: 1 for a copy kept whole; a key's counter of the copies past those
   * (src/claims/quarantine.ts) carries its count so far, with no body, under the same id each time.
   */
  copies: number;
}

export interface RelayReport {
  receiptsRelayed: number;
  quarantinesRelayed: number;
  /** Keys D1 already held under another receipt (e.g. after a shard-count change): never enqueued twice. */
  duplicatesCaughtByD1: number;
  /** Claims and quarantines left in the shard because their database is at its size limit (src/relay/database-room.ts). */
  heldBack: number;
  remaining: number;
}
