import { BODY_INTEGRITY_FAILED, readBodies } from "../../bodies/body-reader";
import type { Database } from "../../db/client";
import { inJsonList } from "../../db/id-list";
import { receiptEventColumns } from "../../db/receipt-columns";
import { receipts } from "../../db/schema";
import { logEvent } from "../../lib/log";
import type { EventFacts } from "../../model/claims";
import { clampQueueDelay, type QueueVerdict } from "../decide/decide";

/** Everything an attempt needs from a receipt, read for a whole consumer batch in one D1 call. */
export interface ReceiptForWork extends EventFacts {
  receiptId: string;
  body: Uint8Array | null;
  /** Why a body kept in R2 cannot be served though it is still there: its bytes fail their payload_sha256. */
  bodyProblem: string | null;
  keptHeaders: string | null;
  receivedAt: number;
  replayedAt: number | null;
  status: string;
  attempts: number;
  leaseGeneration: number;
  nextAttemptAt: number | null;
  leaseUntil: number | null;
  committedAt: number | null;
  /** The route whose delivery the receipt row carries, and the routes filtered out (migrations/0014; src/consumers/deliveries/fan-out.ts). */
  route: string | null;
  filteredRoutes: string | null;
  /** The event's value for its source's `ordered_by` (migrations/0017), null when unordered: a further delivery's row copies it. */
  orderingKey: string | null;
}

/**
 * `bodies` is where large bodies live (the BODIES bucket): read back for receipts that may still be attempted, or for
 * every receipt when `everyBody` (a further route's delivery runs whatever the receipt's own status).
 */
export async function loadReceipts(
  db: Database,
  receiptIds: readonly string[],
  bodies: { BODIES?: R2Bucket } = {},
  everyBody = false,
): Promise<ReceiptForWork[]> {
  if (receiptIds.length === 0) return [];
  const rows = await db
    .select({
      ...receiptEventColumns,
      occurredAt: receipts.occurredAt,
      body: receipts.body,
      bodyLocation: receipts.bodyLocation,
      payloadSha256: receipts.payloadSha256,
      keptHeaders: receipts.keptHeaders,
      receivedAt: receipts.receivedAt,
      replayedAt: receipts.replayedAt,
      status: receipts.status,
      attempts: receipts.attempts,
      leaseGeneration: receipts.leaseGeneration,
      nextAttemptAt: receipts.nextAttemptAt,
      leaseUntil: receipts.leaseUntil,
      committedAt: receipts.committedAt,
      route: receipts.route,
      filteredRoutes: receipts.filteredRoutes,
      orderingKey: receipts.orderingKey,
    })
    .from(receipts)
    .where(inJsonList(receipts.receiptId, receiptIds));
  // A finished receipt is never attempted again: its body stays where it is.
  const inR2 = rows.filter(
    (row) => row.bodyLocation !== null && (everyBody || row.status === "pending" || row.status === "processing"),
  );
  const stored = await readBodies(
    bodies,
    inR2.map((row) => ({
      receiptId: row.receiptId,
      bodyLocation: row.bodyLocation!,
      payloadSha256: row.payloadSha256,
    })),
  );
  for (const receiptId of stored.corrupt) logEvent("bodies.integrity_failed", { receipt: receiptId });
  return rows.map(({ bodyLocation, payloadSha256, ...row }) => ({
    ...row,
    body: bodyLocation === null ? bodyBytes(row.body) : (stored.bodies.get(row.receiptId) ?? null),
    bodyProblem: stored.corrupt.has(row.receiptId) ? BODY_INTEGRITY_FAILED : null,
  }));
}

export type Readiness =
  | { kind: "ready" }
  | { kind: "later"; queue: QueueVerdict }
  | { kind: "finished"; queue: QueueVerdict };

/**
 * Whether an attempt may start now. Pending and due, or leased by a consumer whose lease has run out: go. Not due
 * yet, or leased by a live consumer: come back then (waits past the queue's 12 h cap arrive early and land here
 * again, which is how a day-long backoff is honoured). Anything else has finished.
 */
export function readiness(receipt: ReceiptForWork, now: number): Readiness {
  if (receipt.status === "pending") {
    if (receipt.nextAttemptAt === null || receipt.nextAttemptAt <= now) return { kind: "ready" };
    return {
      kind: "later",
      queue: { kind: "retry", delaySeconds: clampQueueDelay(Math.max(1, (receipt.nextAttemptAt - now) / 1000)) },
    };
  }
  if (receipt.status === "processing") {
    if (receipt.leaseUntil === null || receipt.leaseUntil < now) return { kind: "ready" };
    return {
      kind: "later",
      queue: { kind: "retry", delaySeconds: clampQueueDelay((receipt.leaseUntil - now) / 1000 + 1) },
    };
  }
  return { kind: "finished", queue: { kind: "done", status: receipt.status } };
}

/** D1 returns BLOB columns as arrays of byte values (Drizzle as a Buffer). */
function bodyBytes(body: unknown): Uint8Array | null {
  if (body === null || body === undefined) return null;
  if (body instanceof Uint8Array) return body;
  if (body instanceof ArrayBuffer) return new Uint8Array(body);
  return Uint8Array.from(body as number[]);
}
