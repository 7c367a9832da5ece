import { and, eq, inArray, isNotNull, isNull, type SQL, sql } from "drizzle-orm";
import type { SQLiteUpdateSetSource } from "drizzle-orm/sqlite-core";
import { type Database, database } from "../../db/client";
import { attempts, receipts } from "../../db/schema";
import { placeholder, prepare, statementTemplate } from "../../db/statement-template";
import type { AttemptRun } from "../attempt/run-destination";
import type { AttemptFacts, Decision } from "../decide/decide";
import type { ReceiptForWork } from "../load/load";
import { type FannedOut, furtherDeliveryStatements } from "./delivery-rows";
import { abortUnlessChanged, effectStatements } from "./statements";

/**
 * What a finished attempt writes: the receipt's outcome, the attempt's row, and a processed plan's effect behind
 * the receipt's commit guard (commit.ts runs them and explains an abort). The updates every event's commit
 * starts with are templates built once per isolate (`statementTemplate`), the rest are built per attempt.
 */

export interface FinishedAttempt {
  receipt: ReceiptForWork;
  run: AttemptRun;
  facts: AttemptFacts;
  startedAt: number;
  /** The generation this attempt holds: its lease's, or the next one for a lease-free attempt. */
  generation: number;
  leased: boolean;
  /** Decided before the attempt was committed (an abandoned attempt's verdict, settled before anything ran). */
  decided?: Decision;
  /** A first attempt that fanned the event out to several routes (fan-out.ts): written with the receipt's own outcome. */
  fanOut?: FannedOut;
}

/**
 * Entering a resting status stamps status_entered_at on D1's clock in the same update (migrations/0013 and 0014):
 * the trigger, seeing it set, writes the row no second time.
 */
const STAMPED_ENTRY = { statusEnteredAt: sql`CAST(unixepoch('subsec') * 1000 AS INTEGER)` };

type CommittedResult = Extract<Decision, { kind: "commit" }>["result"] & { status: "processed" | "stale" };

/**
 * The receipt's commit for a processed or stale result, the update every event's commit starts with: a template
 * per shape (leased or not, stale or not, with a fan-out or not), built on first use.
 */
function committedUpdate(d1: D1Database, attempt: FinishedAttempt, result: CommittedResult): D1PreparedStatement {
  const shape = { leased: attempt.leased, stale: result.status === "stale", fanOut: attempt.fanOut !== undefined };
  const key = `${shape.leased}/${shape.stale}/${shape.fanOut}`;
  let template = committedUpdates.get(key);
  if (!template) {
    template = statementTemplate((db) => committedUpdateQuery(db, shape));
    committedUpdates.set(key, template);
  }
  const finishedAt = attempt.facts.finishedAt;
  return template(d1, {
    receiptId: attempt.receipt.receiptId,
    generation: attempt.generation,
    startedAt: attempt.startedAt,
    durationMs: finishedAt - attempt.startedAt,
    route: attempt.fanOut?.route ?? null,
    filteredRoutes: attempt.fanOut?.filtered.join(",") ?? null,
    status: result.status,
    finishedAt,
    lastError: result.status === "stale" ? (result.note ?? null) : null,
    staleAgainstVersion: result.status === "stale" ? result.againstVersion : null,
    httpStatus: result.status === "processed" ? (result.httpStatus ?? null) : null,
  });
}

const committedUpdates = new Map<string, ReturnType<typeof statementTemplate>>();

function committedUpdateQuery(db: Database, shape: { leased: boolean; stale: boolean; fanOut: boolean }) {
  const value = placeholder;
  return db
    .update(receipts)
    .set({
      ...attemptColumnsOf(shape.leased, {
        generation: value("generation"),
        startedAt: value("startedAt"),
        durationMs: value("durationMs"),
      }),
      ...(shape.fanOut ? { route: value("route"), filteredRoutes: value("filteredRoutes") } : {}),
      ...(shape.stale ? STAMPED_ENTRY : {}),
      status: value("status"),
      committedAt: value("finishedAt"),
      processedAt: value("finishedAt"),
      nextAttemptAt: null,
      lastError: value("lastError"),
      staleAgainstVersion: value("staleAgainstVersion"),
      attemptHttpStatus: value("httpStatus"),
    })
    .where(unclaimedReceipt(value("receiptId"), shape.fanOut));
}

/** What every attempt's update writes of the attempt, given its values (or a template's placeholders). */
function attemptColumnsOf(
  leased: boolean,
  values: { generation: number | SQL; startedAt: number | SQL; durationMs: number | SQL },
) {
  return {
    // A leased attempt was counted when it took its lease (lease.ts); a lease-free one is counted here.
    ...(leased ? {} : { attempts: sql`${receipts.attempts} + 1` }),
    // Never backwards: a slow consumer committing after its lease was taken over leaves its successor's generation.
    leaseGeneration: sql`MAX(${receipts.leaseGeneration}, ${values.generation})`,
    leaseUntil: null,
    attemptStartedAt: values.startedAt,
    attemptDurationMs: values.durationMs,
  };
}

/** The receipt while no run has committed it; with a fan-out, while none has written one either (the first does). */
function unclaimedReceipt(receiptId: string | SQL, fanOut: boolean) {
  return and(
    eq(receipts.receiptId, receiptId),
    isNull(receipts.committedAt),
    fanOut ? isNull(receipts.filteredRoutes) : undefined,
  );
}

type CommitResult = Extract<Decision, { kind: "commit" }>["result"];
/** A decision that leaves the receipt at rest or waiting: a skip, nothing to apply, or a failure. */
type RestingDecision =
  | Exclude<Decision, { kind: "commit" }>
  | { kind: "skip"; result: Extract<CommitResult, { status: "skipped" }> };

/** The statements that write one attempt's decision. */
export function statementsFor(d1: D1Database, attempt: FinishedAttempt, decision: Decision): D1PreparedStatement[] {
  if (decision.kind !== "commit") return restingStatements(d1, attempt, decision);
  const { result } = decision;
  return result.status === "skipped"
    ? restingStatements(d1, attempt, { kind: "skip", result })
    : committedStatements(d1, attempt, result);
}

/**
 * Nearly every event's: the commit update (a template), its guard, the plan's effect, a fan-out's further rows and a
 * leased attempt's own row. Nothing here is built per receipt but the handler's own statements and a fan-out's.
 */
function committedStatements(d1: D1Database, attempt: FinishedAttempt, result: CommittedResult): D1PreparedStatement[] {
  const { fanOut } = attempt;
  return [
    committedUpdate(d1, attempt, result),
    abortUnlessChanged(d1),
    ...effectStatements(d1, result.status === "processed" ? attempt.run.plan : null),
    ...(fanOut ? furtherDeliveryStatements(d1, attempt.receipt.receiptId, fanOut) : []),
    ...ownRowOfLeased(
      d1,
      attempt,
      result.status,
      result.status === "stale" ? (result.note ?? null) : null,
      result.status === "processed" ? (result.httpStatus ?? null) : null,
    ),
  ];
}

/** A skip, a replay of a committed event, or a failure: the receipt comes to rest or waits for its next attempt. */
function restingStatements(d1: D1Database, attempt: FinishedAttempt, decision: RestingDecision): D1PreparedStatement[] {
  const db = database({ DB: d1 });
  const { receipt } = attempt;
  const finishedAt = attempt.facts.finishedAt;
  const attemptColumns = attemptColumnsOf(attempt.leased, {
    generation: attempt.generation,
    startedAt: attempt.startedAt,
    durationMs: finishedAt - attempt.startedAt,
  });
  const { fanOut } = attempt;
  const unclaimed = unclaimedReceipt(receipt.receiptId, fanOut !== undefined);
  const fanOutColumns = fanOut ? { route: fanOut.route, filteredRoutes: fanOut.filtered.join(",") } : {};
  const fanOutRows = fanOut
    ? [abortUnlessChanged(d1), ...furtherDeliveryStatements(d1, receipt.receiptId, fanOut)]
    : [];
  // A failure is recorded only by the attempt that still holds the receipt: its lease (still `processing` at its
  // generation: once the lease was found run out, the receipt was handed on), or for a lease-free attempt the
  // generation it read (the first to finish moves it on).
  const stillOurs = attempt.leased
    ? and(unclaimed, eq(receipts.leaseGeneration, attempt.generation), eq(receipts.status, "processing"))
    : and(unclaimed, eq(receipts.leaseGeneration, attempt.generation - 1));
  // A skip and a failure both write the attempt (and a first attempt's fan-out) with their own outcome's columns.
  const attemptUpdate = (outcome: SQLiteUpdateSetSource<typeof receipts>, where: SQL | undefined) =>
    prepare(
      d1,
      db
        .update(receipts)
        .set({ ...attemptColumns, ...fanOutColumns, ...outcome })
        .where(where),
    );

  switch (decision.kind) {
    case "skip": {
      const reason = decision.result.reason.slice(0, 500);
      return [
        attemptUpdate(
          { ...STAMPED_ENTRY, status: "skipped", processedAt: finishedAt, nextAttemptAt: null, lastError: reason },
          unclaimed,
        ),
        ...fanOutRows,
        ...ownRowOfLeased(d1, attempt, "skipped", reason, null),
      ];
    }
    case "nothing":
      if (decision.record === null) return [];
      return [
        // A replay of a committed event: back to the status its committing run decided, nothing applied.
        prepare(
          d1,
          db
            .update(receipts)
            .set({
              status: sql`CASE WHEN ${receipts.staleAgainstVersion} IS NULL THEN 'processed' ELSE 'stale' END`,
              leaseUntil: null,
              nextAttemptAt: null,
            })
            .where(
              and(
                eq(receipts.receiptId, receipt.receiptId),
                isNotNull(receipts.committedAt),
                inArray(receipts.status, ["pending", "processing"]),
              ),
            ),
        ),
        attemptRow(d1, attempt, "duplicate", decision.record.note, null),
      ];
    case "fail":
      return [
        attemptUpdate(
          {
            ...(decision.receiptStatus === "dead" ? STAMPED_ENTRY : {}),
            status: decision.receiptStatus,
            nextAttemptAt: decision.nextAttemptAt,
            lastError: decision.lastError,
            attemptHttpStatus: decision.attempt.httpStatus,
          },
          // With a fan-out, `unclaimed` (in stillOurs) also asks that no run wrote one yet.
          stillOurs,
        ),
        // With a fan-out, the update either changed the receipt or aborted the batch: the attempt's number is its own.
        ...(fanOut ? fanOutRows.slice(0, 1) : []),
        attemptRow(
          d1,
          attempt,
          decision.attempt.outcome,
          decision.attempt.error,
          decision.attempt.httpStatus,
          fanOut !== undefined,
        ),
        ...fanOutRows.slice(1),
      ];
  }
}

/**
 * A success writes no attempt row. But a leased attempt's number is its own, and when its lease ran out before it
 * finished, someone presumed it lost and wrote `unknown` there (lease.ts): its real outcome replaces that row. No row,
 * nothing written.
 */
function ownRowOfLeased(
  d1: D1Database,
  attempt: FinishedAttempt,
  outcome: "processed" | "stale" | "skipped",
  error: string | null,
  httpStatus: number | null,
): D1PreparedStatement[] {
  if (!attempt.leased) return [];
  const finishedAt = attempt.facts.finishedAt;
  return [
    leasedAttemptOutcome(d1, {
      receiptId: attempt.receipt.receiptId,
      attemptNumber: attempt.generation,
      startedAt: attempt.startedAt,
      finishedAt,
      outcome,
      httpStatus,
      error,
      durationMs: finishedAt - attempt.startedAt,
    }),
  ];
}

const leasedAttemptOutcome = statementTemplate((db) => {
  const value = placeholder;
  return db
    .update(attempts)
    .set({
      startedAt: value("startedAt"),
      finishedAt: value("finishedAt"),
      outcome: value("outcome"),
      httpStatus: value("httpStatus"),
      error: value("error"),
      durationMs: value("durationMs"),
    })
    .where(and(eq(attempts.receiptId, value("receiptId")), eq(attempts.attemptNumber, value("attemptNumber"))));
});

function attemptRow(
  d1: D1Database,
  attempt: FinishedAttempt,
  outcome: "retry" | "unknown" | "dead" | "duplicate",
  error: string | null,
  httpStatus: number | null,
  numberIsOwn = false,
): D1PreparedStatement {
  const db = database({ DB: d1 });
  const receiptId = attempt.receipt.receiptId;
  const row = {
    receiptId,
    startedAt: attempt.startedAt,
    finishedAt: attempt.facts.finishedAt,
    outcome,
    httpStatus,
    error,
    durationMs: attempt.facts.finishedAt - attempt.startedAt,
  };
  if (attempt.leased) {
    // A leased attempt's number is its own: any row already there is a presumption (lease expired, outcome unknown)
    // made while it was still running, and its real outcome replaces it.
    const { receiptId: _key, ...outcomeColumns } = row;
    return prepare(
      d1,
      db
        .insert(attempts)
        .values({ ...row, attemptNumber: attempt.generation })
        .onConflictDoUpdate({ target: [attempts.receiptId, attempts.attemptNumber], set: outcomeColumns }),
    );
  }
  if (numberIsOwn)
    return prepare(
      d1,
      db
        .insert(attempts)
        .values({ ...row, attemptNumber: attempt.generation })
        .onConflictDoNothing(),
    );
  if (outcome === "duplicate") {
    // A lease-free duplicate run moves no generation on (the receipt's belongs to the run that committed): it takes
    // the next number after every attempt recorded so far. No lease is taken on a committed receipt, so no later
    // attempt wants that number.
    const attemptNumber = sql<number>`(SELECT MAX(${receipts.leaseGeneration}, COALESCE((SELECT MAX(${attempts.attemptNumber}) FROM ${attempts} WHERE ${attempts.receiptId} = ${receiptId}), 0)) + 1
          FROM ${receipts} WHERE ${receipts.receiptId} = ${receiptId})`;
    return prepare(
      d1,
      db
        .insert(attempts)
        .values({ ...row, attemptNumber })
        .onConflictDoNothing(),
    );
  }
  // A lease-free failure's number is the generation after the one it read, and it is its own only if its fenced
  // update (the statement just before this one) changed the receipt. Otherwise another run of that number finished
  // first and the number is that run's: nothing is written over it.
  return prepare(
    d1,
    sql`INSERT INTO ${attempts} (receipt_id, attempt_number, started_at, finished_at, outcome, http_status, error, duration_ms)
        SELECT ${receiptId}, ${attempt.generation}, ${row.startedAt}, ${row.finishedAt}, ${outcome}, ${httpStatus}, ${error}, ${row.durationMs}
        WHERE changes() > 0
        ON CONFLICT DO NOTHING`,
  );
}
