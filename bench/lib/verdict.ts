import { planWritesInOrder, staleWrites } from "./plan-writes.ts";
import type { ReceiptStore } from "./store.ts";
import type { StreamStats } from "./stream.ts";
import type { Workload } from "./workload.ts";

/** One row of the published table: the same columns, measured for one handler path. */
export interface VerdictRow {
  handler: string;
  deliveries: number;
  status5xx: number;
  duplicateEvents: number;
  extraApplies: number;
  lost: number;
  staleWrites: number;
  staleAccounts: number;
  ledger: number;
  expected: number;
}

/**
 * The receiver's row for one source (its handler's effect: for a source with several routes, the handler route
 * that the receipt row carries), read back from its D1 after every event finished:
 *   duplicate events  keys with more than one receipt, and — independently of that table —
 *                     accounts whose balance exceeds what their credit events add up to (at least one each)
 *   extra applies     credits over the expected balance, summed per account, in events of 100
 *   lost              credit events not processed, plan changes neither processed nor recorded stale, and
 *                     credits missing from balances (whichever is larger)
 *   stale writes      writes of an account's plan, in the order D1 committed them (plan-writes.ts's log), that
 *                     carry a version no newer than one written before them
 *   stale accounts    accounts whose plan_version is not the latest version generated for them
 */
export function receiverVerdict(
  store: ReceiptStore,
  workload: Workload,
  stream: StreamStats,
  keyPrefix: string,
  accountPrefix: string,
  source = "demo",
): VerdictRow {
  return store.read((database) => {
    const like = `${keyPrefix}%`;
    const structuralDuplicates = (
      database
        .prepare(
          `SELECT COUNT(*) AS count FROM (
             SELECT event_key FROM receipts WHERE source = ?2 AND event_key LIKE ?1 GROUP BY event_key HAVING COUNT(*) > 1)`,
        )
        .get(like, source) as { count: number }
    ).count;
    const statusByKey = new Map(
      (
        database
          .prepare("SELECT event_key AS eventKey, status FROM receipts WHERE source = ? AND event_key LIKE ?")
          .all(source, like) as Array<{
          eventKey: string;
          status: string;
        }>
      ).map((row) => [row.eventKey, row.status]),
    );
    const accounts = database
      .prepare("SELECT id, credits, plan_version AS planVersion FROM accounts WHERE id LIKE ?")
      .all(`${accountPrefix}%`) as Array<{ id: string; credits: number; planVersion: number }>;

    let unfinished = 0;
    for (const event of workload.events) {
      const status = statusByKey.get(event.eventKey);
      const done = event.kind === "credit" ? status === "processed" : status === "processed" || status === "stale";
      if (!done) unfinished++;
    }
    const balances = new Map(accounts.map((row) => [row.id, row]));
    let overCreditedAccounts = 0;
    let excess = 0;
    let deficit = 0;
    for (const [accountId, expected] of workload.expectedCredits) {
      const credits = balances.get(accountId)?.credits ?? 0;
      if (credits > expected) {
        overCreditedAccounts++;
        excess += credits - expected;
      } else deficit += expected - credits;
    }
    let staleAccounts = 0;
    for (const [accountId, latest] of workload.latestPlanVersion) {
      if ((balances.get(accountId)?.planVersion ?? 0) !== latest) staleAccounts++;
    }
    return {
      handler: "this receiver",
      deliveries: stream.deliveries,
      status5xx: stream.status5xx,
      duplicateEvents: Math.max(structuralDuplicates, overCreditedAccounts),
      extraApplies: excess / 100,
      lost: Math.max(unfinished, deficit / 100),
      staleWrites: staleWrites(planWritesInOrder(database, accountPrefix)),
      staleAccounts,
      ledger: accounts.reduce((sum, row) => sum + row.credits, 0),
      expected: expectedLedger(workload),
    };
  });
}

/**
 * The control: a handler that applies every delivery on arrival — no dedupe, no version guard — fed the exact
 * requests that reached the receiver, in the order they were sent. A model in Node, not a Worker: it shows what
 * the same delivery stream does to an unguarded handler.
 */
export function naiveVerdict(workload: Workload, stream: StreamStats): VerdictRow {
  const appliesByEvent = new Map<number, number>();
  const credits = new Map<string, number>();
  const planVersion = new Map<string, number>();
  let staleWrites = 0;
  for (const eventIndex of stream.arrivals) {
    const event = workload.events[eventIndex]!;
    appliesByEvent.set(eventIndex, (appliesByEvent.get(eventIndex) ?? 0) + 1);
    if (event.kind === "credit") {
      credits.set(event.accountId, (credits.get(event.accountId) ?? 0) + event.amount);
    } else {
      if (event.version < (planVersion.get(event.accountId) ?? 0)) staleWrites++;
      planVersion.set(event.accountId, event.version);
    }
  }
  let duplicateEvents = 0;
  let extraApplies = 0;
  let lost = 0;
  for (const event of workload.events) {
    if (event.kind !== "credit") continue;
    const applies = appliesByEvent.get(event.index) ?? 0;
    if (applies === 0) lost++;
    if (applies > 1) {
      duplicateEvents++;
      extraApplies += applies - 1;
    }
  }
  let staleAccounts = 0;
  for (const [accountId, latest] of workload.latestPlanVersion)
    if (planVersion.get(accountId) !== latest) staleAccounts++;
  return {
    handler: "naive control (model)",
    deliveries: stream.arrivals.length,
    status5xx: 0,
    duplicateEvents,
    extraApplies,
    lost,
    staleWrites,
    staleAccounts,
    ledger: [...credits.values()].reduce((sum, value) => sum + value, 0),
    expected: expectedLedger(workload),
  };
}

export function expectedLedger(workload: Workload): number {
  return [...workload.expectedCredits.values()].reduce((sum, value) => sum + value, 0);
}

/** What "correct" means for the receiver; an empty list means every number is right. */
export function correctnessProblems(row: VerdictRow): string[] {
  const problems: string[] = [];
  if (row.duplicateEvents !== 0) problems.push(`${row.duplicateEvents} duplicate events`);
  if (row.extraApplies !== 0) problems.push(`${row.extraApplies} extra applies`);
  if (row.lost !== 0) problems.push(`${row.lost} lost`);
  if (row.staleWrites !== 0) problems.push(`${row.staleWrites} stale writes`);
  if (row.staleAccounts !== 0) problems.push(`${row.staleAccounts} stale accounts`);
  if (row.ledger !== row.expected) problems.push(`ledger ${row.ledger} != expected ${row.expected}`);
  return problems;
}

/** Each of the row's correctness problems, as a failure of `phase`. */
export function recordCorrectness(failures: string[], phase: string, row: VerdictRow): void {
  for (const problem of correctnessProblems(row)) failures.push(`${phase}: ${problem}`);
}

export function formatTable(rows: readonly VerdictRow[]): string {
  const header = [
    "handler",
    "deliveries",
    "5xx",
    "dup events",
    "extra applies",
    "lost",
    "stale writes",
    "stale accts",
    "ledger",
    "expected",
  ];
  const widths = [24, 11, 6, 11, 14, 6, 13, 12, 10, 10];
  const line = (cells: Array<string | number>) =>
    cells
      .map((cell, index) => (index === 0 ? String(cell).padEnd(widths[0]!) : String(cell).padStart(widths[index]!)))
      .join("");
  return [
    line(header),
    ...rows.map((row) =>
      line([
        row.handler,
        row.deliveries,
        row.status5xx,
        row.duplicateEvents,
        row.extraApplies,
        row.lost,
        row.staleWrites,
        row.staleAccounts,
        row.ledger,
        row.expected,
      ]),
    ),
  ].join("\n");
}
