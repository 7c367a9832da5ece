/**
 * Cost per accepted event. What the run measures: HTTP deliveries, relay batches (distinct relayed_at), queue
 * sendBatch calls (distinct enqueued_at), processing attempts (receipts.attempts) and the plan/credit mix. What
 * is derived by reading the code (src/claims/shard.ts, src/relay/relay.ts, src/consumers/process.ts,
 * src/consumers/handlers/accounts.ts): rows each statement reads and writes, counting one extra written row per
 * index a write touches, as Cloudflare bills it. Local D1 and DO storage do not report billed rows to the
 * outside, so these row counts are an estimate from the statements, not a meter reading.
 */

export interface RunCounts {
  accepted: number;
  httpDeliveries: number;
  relayBatches: number;
  enqueueBatches: number;
  processingAttempts: number;
  planEvents: number;
}

/** Published prices (USD, Workers Paid, beyond the monthly inclusions), read 2026-11-30. Sources in docs/performance.md. */
export const PRICES = {
  workersRequestPerMillion: 0.3,
  durableObjectRequestPerMillion: 0.15,
  sqliteRowsReadPerMillion: 0.001,
  sqliteRowsWrittenPerMillion: 1.0,
  queueOperationPerMillion: 0.4,
} as const;

export interface CostLine {
  item: string;
  perEvent: number;
  unitPricePerMillion: number;
  usdPerMillionEvents: number;
  basis: string;
}

export function costModel(counts: RunCounts): { counts: RunCounts; lines: CostLine[]; totalUsdPerMillionEvents: number } {
  const per = (value: number) => value / counts.accepted;
  const attempts = per(counts.processingAttempts);
  const planShare = per(counts.planEvents);
  const duplicates = per(counts.httpDeliveries - counts.accepted);
  const relays = per(counts.relayBatches);

  // Claim shard (DO SQLite): a new key reads its primary key and writes the row plus two indexes (primary key,
  // claims_unrelayed); a duplicate reads one row (and bumps a per-shard counter row); the relay reads each
  // unrelayed row and rewrites it (row + claims_unrelayed), and counts what is left.
  const doRowsRead = 1 + duplicates * 2 + 2 + relays;
  const doRowsWritten = 3 + duplicates + 2;
  // D1 relay: INSERT receipts (row + primary key + 4 indexes), SELECT the batch back, UPDATE enqueued_at.
  // Per attempt: the lease UPDATE (row + status index); one batch that closes a dangling attempt, inserts the
  // attempt row (row + key) and looks up the processed key; the attempt's closing UPDATE. Once: the commit batch —
  // processed_events INSERT (row + key), the account upsert, the receipt's final UPDATE (row + status index); a
  // plan change also reads the stored version first.
  const d1RowsRead = 2 + attempts * 5 + 2 + planShare;
  const d1RowsWritten = 6 + 1 + attempts * (2 + 2 + 1) + 2 + 1 + 2;
  // Queues: each message is written, read and deleted once (3 operations); a retry adds a read.
  const queueOperations = 3 + (attempts - 1);

  const line = (item: string, perEvent: number, unitPricePerMillion: number, basis: string): CostLine => ({
    item,
    perEvent,
    unitPricePerMillion,
    usdPerMillionEvents: perEvent * unitPricePerMillion,
    basis,
  });
  const lines = [
    line("Workers requests (deliveries)", per(counts.httpDeliveries), PRICES.workersRequestPerMillion, "measured"),
    line("DO requests (claims + relay alarms)", per(counts.httpDeliveries) + relays, PRICES.durableObjectRequestPerMillion, "measured"),
    line("DO SQLite rows read", doRowsRead, PRICES.sqliteRowsReadPerMillion, "derived"),
    line("DO SQLite rows written", doRowsWritten, PRICES.sqliteRowsWrittenPerMillion, "derived"),
    line("D1 rows read", d1RowsRead, PRICES.sqliteRowsReadPerMillion, "derived"),
    line("D1 rows written", d1RowsWritten, PRICES.sqliteRowsWrittenPerMillion, "derived"),
    line("Queue operations", queueOperations, PRICES.queueOperationPerMillion, "measured attempts"),
  ];
  return { counts, lines, totalUsdPerMillionEvents: lines.reduce((sum, entry) => sum + entry.usdPerMillionEvents, 0) };
}

export function formatCost(cost: ReturnType<typeof costModel>): string {
  const { counts } = cost;
  const rows = cost.lines.map(
    (entry) =>
      `${entry.item.padEnd(38)}${entry.perEvent.toFixed(2).padStart(10)}${`$${entry.unitPricePerMillion}`.padStart(10)}` +
        `${`$${entry.usdPerMillionEvents.toFixed(2)}`.padStart(12)}  ${entry.basis}`,
  );
  return [
    `measured: ${counts.accepted} accepted events, ${counts.httpDeliveries} deliveries, ${counts.relayBatches} relay batches, ` +
      `${counts.enqueueBatches} queue sendBatch calls, ${counts.processingAttempts} processing attempts`,
    `${"item".padEnd(38)}${"per event".padStart(10)}${"$/M".padStart(10)}${"$/M events".padStart(12)}  basis`,
    ...rows,
    `${"total, beyond the Workers Paid inclusions".padEnd(58)}${`$${cost.totalUsdPerMillionEvents.toFixed(2)}`.padStart(12)}  (+ CPU time and DO duration, not modelled)`,
  ].join("\n");
}
