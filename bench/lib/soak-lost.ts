import { basename } from "node:path";
import { DatabaseSync } from "node:sqlite";
import type { HeardOf } from "./forward-backend.ts";
import { type ReceiptStore, shardFiles } from "./store.ts";

/**
 * Why a forward the faulted soak counts lost was lost: per key, its receipt row wherever it lives (DB or a ring
 * partition), its rows in `attempts`, its claim in the shards, and what the backend heard under its
 * `x-webhook-event-key` (forwards answered 200 or 503, and the sizes of bodies it could not read the key from).
 * Read after the run from the runtime's own files, read-only; no body is ever read or printed.
 */

export interface LostReceipt {
  /** The D1 file's name (a hash), so two rows of one key in two databases show as such. */
  database: string;
  id: string;
  status: string;
  attempts: number;
  leaseGeneration: number;
  lastError: string | null;
  bodyLocation: string | null;
  committedAt: number | null;
  processedAt: number | null;
  nextAttemptAt: number | null;
  attemptHttpStatus: number | null;
  attemptRows: Array<{
    attemptNumber: number;
    outcome: string | null;
    httpStatus: number | null;
    error: string | null;
  }>;
}

export interface LostForward {
  key: string;
  receipts: LostReceipt[];
  /** The key's claims in the shards: relay_pending 1 is not relayed yet. */
  claims: Array<{ relayPending: number; receiptId: string }>;
  heard: HeardOf | null;
}

/** At most this many lost keys are described (the count is always whole). */
export const LOST_DESCRIBED = 50;

export function describeLostForwards(
  store: ReceiptStore,
  persistDir: string,
  source: string,
  keys: readonly string[],
  heardOf: (eventKey: string) => HeardOf | null,
): LostForward[] {
  const described = keys.slice(0, LOST_DESCRIBED);
  const receiptsByKey = new Map<string, LostReceipt[]>();
  for (const file of store.databaseFiles()) {
    const database = new DatabaseSync(file, { readOnly: true });
    try {
      database.exec("PRAGMA busy_timeout = 5000");
      if (!database.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'receipts'").get()) continue;
      const receipt = database.prepare(
        `SELECT id, status, attempts, lease_generation AS leaseGeneration, last_error AS lastError,
           body_location AS bodyLocation, committed_at AS committedAt, processed_at AS processedAt,
           next_attempt_at AS nextAttemptAt, attempt_http_status AS attemptHttpStatus
         FROM receipts WHERE source = ? AND event_key = ?`,
      );
      const attemptRows = database.prepare(
        `SELECT attempt_number AS attemptNumber, outcome, http_status AS httpStatus, error
         FROM attempts WHERE receipt_id = ? ORDER BY attempt_number`,
      );
      for (const key of described) {
        for (const row of receipt.all(source, key) as unknown as Omit<LostReceipt, "database" | "attemptRows">[]) {
          const rows = attemptRows.all(row.id) as unknown as LostReceipt["attemptRows"];
          receiptsByKey.set(key, [
            ...(receiptsByKey.get(key) ?? []),
            { database: basename(file).slice(0, 12), ...row, attemptRows: rows },
          ]);
        }
      }
    } finally {
      database.close();
    }
  }
  const claimsByKey = new Map<string, LostForward["claims"]>();
  for (const file of shardFiles(persistDir)) {
    const database = new DatabaseSync(file, { readOnly: true });
    try {
      database.exec("PRAGMA busy_timeout = 5000");
      if (!database.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'claim_partitions'").get())
        continue;
      const tables = (
        database.prepare("SELECT generation FROM claim_partitions").all() as { generation: number }[]
      ).map(({ generation }) => (generation === 0 ? "event_claims" : `event_claims_${generation}`));
      for (const table of tables) {
        const claim = database.prepare(
          `SELECT relay_pending AS relayPending, receipt_id AS receiptId FROM ${table} WHERE source = ? AND event_key = ?`,
        );
        for (const key of described) {
          const rows = claim.all(source, key) as unknown as LostForward["claims"];
          if (rows.length > 0) claimsByKey.set(key, [...(claimsByKey.get(key) ?? []), ...rows]);
        }
      }
    } finally {
      database.close();
    }
  }
  return described.map((key) => ({
    key,
    receipts: receiptsByKey.get(key) ?? [],
    claims: claimsByKey.get(key) ?? [],
    heard: heardOf(key),
  }));
}

/** One line per lost key: enough to tell a finished receipt without a 200 from one still under way or a bench miscount. */
export function formatLostForward(lost: LostForward): string {
  const receipts = lost.receipts.length
    ? lost.receipts
        .map(
          (r) =>
            `receipt ${r.id} in ${r.database}: ${r.status}, attempts ${r.attempts}, generation ${r.leaseGeneration}, ` +
            `committed ${r.committedAt ?? "—"}, next ${r.nextAttemptAt ?? "—"}, last http ${r.attemptHttpStatus ?? "—"}, ` +
            `body ${r.bodyLocation ?? "in row"}, last error ${JSON.stringify(r.lastError)}; attempt rows ` +
            (r.attemptRows.map((a) => `#${a.attemptNumber} ${a.outcome}/${a.httpStatus ?? "—"}`).join(" ") || "none"),
        )
        .join(" | ")
    : "no receipt row";
  const claims = lost.claims.map((c) => `${c.receiptId} relay_pending ${c.relayPending}`).join(", ") || "none";
  const heard = lost.heard
    ? `answered 200 ×${lost.heard.answered}, 503 ×${lost.heard.refused}, unreadable bodies [${lost.heard.unreadableSizes.join(", ")}] bytes, ` +
      `other keys [${lost.heard.otherKeys.join(", ")}]`
    : "nothing";
  return `lost ${lost.key}: ${receipts}; claims: ${claims}; backend heard: ${heard}`;
}
