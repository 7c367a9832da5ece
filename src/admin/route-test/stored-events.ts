import { loadReceipts } from "../../consumers/load/load";
import { database } from "../../db/client";
import type { RoutedEvent } from "../../routing/route";
import { MAX_PAGE_SIZE } from "../receipts/filters";
import { searchReceipts } from "../receipts/lists";
import { groupByDatabase } from "../receipts/receipt-databases";

/**
 * A source's newest stored events, newest first, with their bodies: the admin list's own paging (searchReceipts,
 * across every receipt database) for which receipts, and the consumer's own load (loadReceipts: the body from its D1
 * column or R2, object or segment, checked against its SHA-256) for what they hold. One page at a time, so at most
 * MAX_PAGE_SIZE bodies are held at once whatever `last` is.
 */

export type StoredEvent =
  | { kind: "event"; receiptId: string; eventKey: string; eventType: string | null; event: RoutedEvent }
  /** Dropped by payload retention (the row's body, or the R2 object it pointed at, is gone): counted, never guessed. */
  | { kind: "gone"; receiptId: string }
  /** Stored bytes that fail their payload_sha256: the consumer would never send them, so neither is this evaluated. */
  | { kind: "corrupt"; receiptId: string };

export async function* newestStoredEvents(env: Env, source: string, last: number): AsyncGenerator<StoredEvent[]> {
  const seen = new Set<string>();
  let before: string | undefined;
  while (seen.size < last) {
    const page = await searchReceipts(env, { source, before, limit: Math.min(MAX_PAGE_SIZE, last - seen.size) });
    // A page can start with receipts relayed behind the previous read (receipt-cursor.ts): each is taken once.
    const fresh = page.receipts.filter((receipt) => !seen.has(receipt.receiptId)).slice(0, last - seen.size);
    for (const receipt of fresh) seen.add(receipt.receiptId);
    yield await withBodies(env, fresh);
    if (page.nextCursor === null || page.receipts.length === 0) return;
    before = page.nextCursor;
  }
}

async function withBodies(
  env: Env,
  summaries: readonly { receiptId: string; bodyRetained: boolean }[],
): Promise<StoredEvent[]> {
  const retained = summaries.filter((summary) => summary.bodyRetained).map((summary) => summary.receiptId);
  const groups = retained.length === 0 ? [] : await groupByDatabase(env, retained);
  const loaded = (
    await Promise.all(groups.map((group) => loadReceipts(database(group.env), group.receiptIds, env, true)))
  ).flat();
  const byId = new Map(loaded.map((receipt) => [receipt.receiptId, receipt]));
  return summaries.map(({ receiptId }): StoredEvent => {
    const receipt = byId.get(receiptId);
    if (receipt?.bodyProblem) return { kind: "corrupt", receiptId };
    if (!receipt?.body) return { kind: "gone", receiptId };
    return {
      kind: "event",
      receiptId,
      eventKey: receipt.eventKey,
      eventType: receipt.eventType,
      event: {
        body: receipt.body,
        keptHeaders: receipt.keptHeaders,
        eventType: receipt.eventType,
        subjectId: receipt.subjectId,
      },
    };
  });
}
