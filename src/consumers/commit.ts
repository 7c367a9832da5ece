import { eq } from "drizzle-orm";
import { database } from "../db/client";
import { receipts } from "../db/schema";
import type { VersionGate } from "../handlers/types";
import { logError } from "../lib/log";
import { meteredD1 } from "../lib/meter";
import { type FinishedAttempt, statementsFor } from "./commit-statements";
import { type Decision, decide } from "./decide";
import { batchUnlessEmpty } from "./statements";

/**
 * Writing what a consumer batch decided: every receipt's outcome, and every applied plan's effect, in one D1
 * batch (one transaction). The guard that makes an effect happen once is the receipt's own row: its commit update
 * (`committed_at IS NULL` → set) runs first in the event's statements, and when it changes nothing — an earlier
 * run committed this event — the next statement aborts the whole batch. A version gate works the same way. If the
 * shared batch aborts, each receipt is committed on its own, and the one that aborted again is told apart by
 * reading its row, never by the error's text.
 */

/** Commits every attempt, shared batch first; returns the decision each receipt ended with. */
export async function commitAttempts(env: Env, finished: readonly FinishedAttempt[]): Promise<Map<string, Decision>> {
  const d1 = meteredD1(env.DB);
  const decided = finished.map((attempt) => ({
    attempt,
    decision: attempt.decided ?? decide(attempt.run.result, attempt.facts),
  }));
  const outcomes = new Map<string, Decision>();
  if (decided.length === 0) return outcomes;
  try {
    await batchUnlessEmpty(
      d1,
      decided.flatMap(({ attempt, decision }) => statementsFor(d1, attempt, decision)),
    );
    for (const { attempt, decision } of decided) outcomes.set(attempt.receipt.receiptId, decision);
    return outcomes;
  } catch (sharedFailure) {
    if (decided.length === 1) {
      const { attempt, decision } = decided[0]!;
      outcomes.set(attempt.receipt.receiptId, await commitAlone(env, attempt, decision, sharedFailure));
      return outcomes;
    }
  }
  // One receipt's guard (or a handler's statement) aborted the shared batch: commit each on its own.
  for (const { attempt, decision } of decided) {
    outcomes.set(attempt.receipt.receiptId, await commitAlone(env, attempt, decision, null));
  }
  return outcomes;
}

async function commitAlone(
  env: Env,
  attempt: FinishedAttempt,
  decision: Decision,
  knownFailure: unknown,
): Promise<Decision> {
  const d1 = meteredD1(env.DB);
  if (knownFailure === null) {
    try {
      await batchUnlessEmpty(d1, statementsFor(d1, attempt, decision));
      return decision;
    } catch (failure) {
      knownFailure = failure;
    }
  }
  const explained = await explainAbort(env, attempt, decision, knownFailure);
  const fallback = explained.decision;
  try {
    await batchUnlessEmpty(d1, statementsFor(d1, explained.attempt, fallback));
    return fallback;
  } catch (error) {
    // Another run may have committed the event between the explanation and this write: then this attempt is a
    // duplicate, and the rest of the batch goes on. Anything else (D1 gone) fails the batch, to be retried whole.
    if (!(await isCommitted(env, attempt))) throw error;
    logError("commit.raced", error, { receipt: attempt.receipt.receiptId });
    return { kind: "nothing", queue: { kind: "done", status: "duplicate" }, record: null };
  }
}

async function isCommitted(env: Env, attempt: FinishedAttempt): Promise<boolean> {
  const [row] = await database(env)
    .select({ committedAt: receipts.committedAt })
    .from(receipts)
    .where(eq(receipts.receiptId, attempt.receipt.receiptId));
  return row?.committedAt != null;
}

/**
 * Why an event's batch aborted, from stored state: committed by another run, lost its version gate, or failed. A
 * first attempt that fanned out is written again without its fan-out when another run's fan-out came first (that
 * run's deliveries stand), or with its further routes' effects left to their own deliveries when the abort was ours.
 */
async function explainAbort(
  env: Env,
  attempt: FinishedAttempt,
  decision: Decision,
  failure: unknown,
): Promise<{ attempt: FinishedAttempt; decision: Decision }> {
  const db = database(env);
  const [row] = await db
    .select({ committedAt: receipts.committedAt, filteredRoutes: receipts.filteredRoutes })
    .from(receipts)
    .where(eq(receipts.receiptId, attempt.receipt.receiptId));
  if (attempt.fanOut && row && row.filteredRoutes !== null) {
    const alone = { ...attempt, fanOut: undefined };
    return {
      attempt: alone,
      decision: row.committedAt != null ? decide({ status: "duplicate" }, attempt.facts) : decision,
    };
  }
  const deferred = attempt.fanOut ? { ...attempt, fanOut: { ...attempt.fanOut, deferEffects: true } } : attempt;
  return { attempt: deferred, decision: await explainOwnAbort(attempt, row?.committedAt ?? null, failure) };
}

async function explainOwnAbort(
  attempt: FinishedAttempt,
  committedAt: number | null,
  failure: unknown,
): Promise<Decision> {
  if (committedAt != null) return decide({ status: "duplicate" }, attempt.facts);
  const gate = attempt.run.plan?.versionGate;
  if (gate) {
    const stored = await storedVersion(gate);
    if (stored !== null && stored >= gate.version) {
      const note =
        stored === gate.version && gate.orderedBy === "timestamp"
          ? "order unknown: same timestamp as the stored state; not applied"
          : undefined;
      return decide({ status: "stale", againstVersion: stored, note }, attempt.facts);
    }
  }
  const message = failure instanceof Error ? failure.message : String(failure);
  return decide({ status: "retry", error: `commit failed: ${message}` }, attempt.facts);
}

async function storedVersion(gate: VersionGate): Promise<number | null> {
  const row = await gate.readStored.first<{ version: number | null }>();
  return row?.version ?? null;
}
