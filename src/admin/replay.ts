import { apiError } from "../lib/errors";
import { logEvent } from "../lib/log";
import { ReplayFilterError, replayDeadReceipts, replayReceipt, type DeadReceiptFilter, type ReplayOne, type ReplayRequester } from "../replay/replay";

/**
 * The admin surface's door to replay. Replay itself — resetting a receipt and putting it back on the queue —
 * is src/replay's; this adapts its answers to one report shape for the API and the dashboard, and logs who
 * asked for how much (counts only).
 */

export interface ReplayReport {
  receiptId: string;
  /** "replayed", or why not: "not_found", "in_flight" (pending or processing), "payload_expired". */
  outcome: ReplayOne["kind"];
}

export interface BulkReplayReport {
  replayed: number;
  /** More receipts matched the filter than one call replays: call again. */
  more: boolean;
  results: ReplayReport[];
}

export const MAX_REPLAY_IDS = 100;

export async function replayByIds(env: Env, receiptIds: readonly string[], requestedBy: ReplayRequester): Promise<BulkReplayReport> {
  const results: ReplayReport[] = [];
  // One at a time: each is a read, a guarded reset and an enqueue, and a bulk request must not burst D1.
  for (const receiptId of receiptIds) {
    const outcome = await replayReceipt(env, receiptId, Date.now(), requestedBy);
    results.push({ receiptId, outcome: outcome.kind });
  }
  const replayed = results.filter((result) => result.outcome === "replayed").length;
  logEvent("admin.replay", { mode: "ids", requested: receiptIds.length, replayed });
  return { replayed, more: false, results };
}

export async function replayDeadMatching(env: Env, filter: DeadReceiptFilter, requestedBy: ReplayRequester): Promise<BulkReplayReport> {
  let outcome;
  try {
    outcome = await replayDeadReceipts(env, filter, Date.now(), requestedBy);
  } catch (error) {
    if (error instanceof ReplayFilterError) throw apiError(400, "invalid_body", `Replay filter: ${error.message}.`);
    throw error;
  }
  logEvent("admin.replay", { mode: "filter", source: filter.source, replayed: outcome.replayed, more: outcome.more });
  return {
    replayed: outcome.replayed,
    more: outcome.more,
    results: outcome.receiptIds.map((receiptId) => ({ receiptId, outcome: "replayed" as const })),
  };
}
