/**
 * The admin API's answers as the CLI reads them: only the fields it uses. The worker's own types
 * (src/admin/) need the Worker runtime's types, which the Node-side typecheck does not load, so these are
 * written out here; test/cli checks them against a running receiver.
 */

/** One receipt as lists and the detail show it. */
export interface Receipt {
  receiptId: string;
  source: string;
  eventKey: string;
  eventType: string | null;
  subjectId?: string | null;
  version?: number | null;
  status: string;
  provenance: string;
  attempts: number;
  replayCount?: number;
  receivedAt: number;
  occurredAt?: number | null;
  relayedAt?: number | null;
  processedAt?: number | null;
  dismissedAt?: number | null;
  restoredAt?: number | null;
  nextAttemptAt?: number | null;
  lastError?: string | null;
  staleAgainstVersion?: number | null;
  keptHeaders?: Record<string, string> | null;
}

/** The stored bytes as text, or base64 when they are not UTF-8; null past payload retention. */
export type StoredBody = { encoding: "utf8" | "base64"; text: string } | null;

export interface Attempt {
  attemptNumber: number;
  startedAt: number;
  finishedAt: number | null;
  outcome: string | null;
  httpStatus: number | null;
  error: string | null;
  durationMs: number | null;
}

export interface Replay {
  replayNumber: number;
  replayedAt: number;
  previousStatus: string | null;
  requestedBy: string | null;
}

/** GET /receipts/:id and GET /sources/:source/events/:key. */
export interface ReceiptDetail {
  receipt: Receipt & { body: StoredBody };
  attempts: Attempt[];
  replays?: Replay[];
  quarantine?: { quarantineId: string; reason: string; receivedAt: number }[];
  /** Each route's delivery and its outcome (src/admin/receipts/route-outcomes.ts). */
  routes?: {
    route: string | null;
    status: string;
    attempts: number;
    lastError: string | null;
    httpStatus: number | null;
    nextAttemptAt: number | null;
    replayCount: number;
  }[];
  /** The receipt's status across its deliveries. */
  summary?: string;
}

/** GET /receipts: the newest page. */
export interface ReceiptList {
  receipts: Receipt[];
}

/** GET /receipts?changedSince=: the receipts changed after the cursor, and where to go on from. */
export interface ReceiptChanges {
  receipts: Receipt[];
  changesCursor: string;
  more: boolean;
}

/** POST /receipts/:id/replay. */
export interface ReplayReport {
  receiptId: string;
  outcome: string;
}

/** POST /dead/replay. */
export interface BulkReplayReport {
  replayed: number;
  more: boolean;
  cursor: string | null;
  results: ReplayReport[];
}

/** GET /stats: the parts `tail` reads. */
export interface Stats {
  sources?: { duplicatesByHour?: { hour: number; deliveries: number }[] | null }[];
}

export interface KeptSecretListing {
  fingerprint: string;
  status: "active" | "pending";
  receivedAt: number;
}

/** GET /sources/:source/kept-secrets, and POST …/:fingerprint/approve|revoke. */
export type KeptSecretsAnswer =
  | { source: string; keptSecrets: KeptSecretListing[] }
  | { source: string; approved: KeptSecretListing }
  | { source: string; revoked: KeptSecretListing };
