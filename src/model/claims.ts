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
  body: Uint8Array;
  /** JSON object of kept headers (never signature headers). */
  keptHeaders: string;
  receivedAt: number;
  provenance: Provenance;
}

export type ClaimDisposition = "accepted" | "duplicate" | "quarantined";

export interface ClaimResult {
  disposition: ClaimDisposition;
  /** The receipt this key belongs to: the new one when accepted, the original otherwise. */
  receiptId: string;
}

/** A claim the shard has accepted but not yet relayed into D1. */
export interface PendingClaim extends EventFacts {
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
