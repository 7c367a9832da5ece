import { eq } from "drizzle-orm";
import { database } from "../../db/client";
import { receipts } from "../../db/schema";
import type { VersionGate } from "../../handlers/types";
import { logError } from "../../lib/log";
import { meteredD1 } from "../../lib/meter";
import { type Decision, decide } from "../decide/decide";
import type { ReceiptForWork } from "../load/load";
import { type AttemptToWrite, abortOutcome, furtherEffectMayAbort } from "./abort-outcome";
import { type FinishedAttempt, statementsFor } from "./commit-statements";
import type { FannedOut } from "./delivery-rows";
import { batchUnlessEmpty } from "./statements";

/**
 * Writing what a consumer batch decided: every receipt's outcome, and every applied plan's effect, in one D1
 * batch (one transaction). The guard that makes an effect happen once is the receipt's own row: its commit update
 * (`committed_at IS NULL` → set) runs first in the event's statements, and when it changes nothing — an earlier
 * run committed this event — the next statement aborts the whole batch. A version gate works the same way. If the
 * shared batch aborts, each receipt is committed on its own, and the one that aborted again is told apart by
 * reading its row, never by the error's text. A first attempt that fanned out is then written once more with its
 * further routes' effects left to their own deliveries: if that goes through, its own delivery stands as decided
 * (abort-outcome.ts decides what each delivery becomes).
 */

/** What a consumer batch's commit wrote: each receipt's decision, and each fan-out as it was written. */
export interface CommittedAttempts {
  decisions: Map<string, Decision>;
  /** The fan-outs written, each with the further deliveries' outcomes as written (their messages follow from them). */
  fannedOut: { receipt: ReceiptForWork; fanOut: FannedOut }[];
}

/** Commits every attempt, shared batch first. */
export async function commitAttempts(env: Env, finished: readonly FinishedAttempt[]): Promise<CommittedAttempts> {
  const d1 = meteredD1(env.DB);
  const decided = finished.map((attempt) => ({
    attempt,
    decision: attempt.decided ?? decide(attempt.run.result, attempt.facts),
  }));
  return committed(await commitDecided(env, d1, decided));
}

async function commitDecided(
  env: Env,
  d1: D1Database,
  decided: readonly AttemptToWrite[],
): Promise<readonly AttemptToWrite[]> {
  if (decided.length === 0) return decided;
  try {
    await batchUnlessEmpty(
      d1,
      decided.flatMap(({ attempt, decision }) => statementsFor(d1, attempt, decision)),
    );
    return decided;
  } catch (sharedFailure) {
    if (decided.length === 1) {
      const { attempt, decision } = decided[0]!;
      return [await commitAlone(env, attempt, decision, sharedFailure)];
    }
  }
  // One receipt's guard (or a handler's statement) aborted the shared batch: commit each on its own.
  const written: AttemptToWrite[] = [];
  for (const { attempt, decision } of decided) written.push(await commitAlone(env, attempt, decision, null));
  return written;
}

/** A fan-out was written when its attempt wrote anything of the receipt (a `nothing` decision writes no fan-out). */
function committed(written: readonly AttemptToWrite[]): CommittedAttempts {
  return {
    decisions: new Map(written.map(({ attempt, decision }) => [attempt.receipt.receiptId, decision])),
    fannedOut: written.flatMap(({ attempt: { receipt, fanOut }, decision }) =>
      fanOut && decision.kind !== "nothing" ? [{ receipt, fanOut }] : [],
    ),
  };
}

/** Commits one attempt; after an abort, what the abort was found to be decides what is written (abort-outcome.ts). */
async function commitAlone(
  env: Env,
  attempt: FinishedAttempt,
  decision: Decision,
  knownFailure: unknown,
): Promise<AttemptToWrite> {
  const d1 = meteredD1(env.DB);
  let failure = knownFailure;
  if (failure === null) {
    try {
      await batchUnlessEmpty(d1, statementsFor(d1, attempt, decision));
      return { attempt, decision };
    } catch (error) {
      failure = error;
    }
  }
  const [row] = await database(env)
    .select({ committedAt: receipts.committedAt, filteredRoutes: receipts.filteredRoutes })
    .from(receipts)
    .where(eq(receipts.receiptId, attempt.receipt.receiptId));
  if (attempt.fanOut && row && row.filteredRoutes !== null)
    return writeOutcome(
      env,
      abortOutcome(attempt, decision, { kind: "fanned-out-elsewhere", committed: row.committedAt != null }),
    );
  if (furtherEffectMayAbort(attempt.fanOut)) {
    // Which statement aborted is not told by the error (its text is never read): the receipt's own are tried alone,
    // the further routes' effects left to their deliveries. Through, the receipt's own delivery stands as decided.
    const ownAlone = abortOutcome(attempt, decision, { kind: "further-effect" });
    try {
      await batchUnlessEmpty(d1, statementsFor(d1, ownAlone.attempt, ownAlone.decision));
      logError("commit.further_effect_deferred", failure, { receipt: attempt.receipt.receiptId });
      return ownAlone;
    } catch (error) {
      failure = error;
    }
  }
  const explained = await explainOwnAbort(attempt, row?.committedAt ?? null, failure);
  return writeOutcome(env, abortOutcome(attempt, decision, { kind: "own", explained }));
}

async function writeOutcome(env: Env, outcome: AttemptToWrite): Promise<AttemptToWrite> {
  const d1 = meteredD1(env.DB);
  try {
    await batchUnlessEmpty(d1, statementsFor(d1, outcome.attempt, outcome.decision));
    return outcome;
  } catch (error) {
    // Another run may have committed the event between the explanation and this write: then this attempt is a
    // duplicate, and the rest of the batch goes on. Anything else (D1 gone) fails the batch, to be retried whole.
    if (!(await isCommitted(env, outcome.attempt))) throw error;
    logError("commit.raced", error, { receipt: outcome.attempt.receipt.receiptId });
    return {
      attempt: outcome.attempt,
      decision: { kind: "nothing", queue: { kind: "done", status: "duplicate" }, record: null },
    };
  }
}

async function isCommitted(env: Env, attempt: FinishedAttempt): Promise<boolean> {
  const [row] = await database(env)
    .select({ committedAt: receipts.committedAt })
    .from(receipts)
    .where(eq(receipts.receiptId, attempt.receipt.receiptId));
  return row?.committedAt != null;
}

/** Why the event's own statements aborted, from stored state: committed by another run, lost its version gate, or failed. */
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
