import { and, eq } from "drizzle-orm";
import { database } from "../../db/client";
import { deliveries } from "../../db/schema";
import { meteredD1 } from "../../lib/meter";
import { decide, type QueueVerdict } from "../decide/decide";
import { type DeliveryAttempt, deliveryOutcomeStatements } from "./delivery-rows";
import { batchUnlessEmpty } from "./statements";

/**
 * Writing what a slice of further deliveries' later attempts decided (deliveries.ts runs them), as commit.ts does for
 * receipts: each delivery's guard is its own row's `committed_at`, and an abort is told apart by reading that row,
 * never by the error's text.
 */

/** Every attempt's outcome in one batch; if it aborts (a guard, a version gate), each on its own. */
export async function commitDeliveries(
  env: Env,
  finished: readonly DeliveryAttempt[],
): Promise<Map<string, QueueVerdict>> {
  const d1 = meteredD1(env.DB);
  const verdicts = new Map<string, QueueVerdict>();
  try {
    await batchUnlessEmpty(
      d1,
      finished.flatMap((attempt) => deliveryOutcomeStatements(d1, attempt)),
    );
    for (const attempt of finished) verdicts.set(attempt.receiptId, attempt.decision.queue);
    return verdicts;
  } catch {
    // One delivery's guard aborted the shared batch: each on its own.
  }
  for (const attempt of finished) {
    try {
      await batchUnlessEmpty(d1, deliveryOutcomeStatements(d1, attempt));
      verdicts.set(attempt.receiptId, attempt.decision.queue);
    } catch (error) {
      const [row] = await database(env)
        .select({ committedAt: deliveries.committedAt })
        .from(deliveries)
        .where(and(eq(deliveries.receiptId, attempt.receiptId), eq(deliveries.route, attempt.route)));
      if (row?.committedAt != null) {
        verdicts.set(attempt.receiptId, { kind: "done", status: "duplicate" });
        continue;
      }
      // The effect could not be written (its version gate, or D1): retried on the delivery's schedule (its route's).
      const failed = decide(
        { status: "retry", error: `commit failed: ${error instanceof Error ? error.message : String(error)}` },
        attempt.facts,
      );
      await batchUnlessEmpty(d1, deliveryOutcomeStatements(d1, { ...attempt, decision: failed }));
      verdicts.set(attempt.receiptId, failed.queue);
    }
  }
  return verdicts;
}
