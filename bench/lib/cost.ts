/**
 * A cross-check of the meters phase, not a measurement: billed units per event derived by reading the
 * statements (src/claims/shard.ts, src/relay/relay.ts, src/consumers/*) and counting one written row per index
 * a write touches, applied to what a run measured (HTTP deliveries, relay batches as distinct relayed_at,
 * processing attempts, the plan/credit mix). When this and `npm run bench -- --only meters` disagree, one of
 * them no longer describes the code.
 */

import { PRICES } from "./meters.ts";

export interface RunCounts {
  accepted: number;
  httpDeliveries: number;
  relayBatches: number;
  processingAttempts: number;
  planEvents: number;
}

export interface CostLine {
  item: string;
  perEvent: number;
  unitPricePerMillion: number;
  usdPerMillionEvents: number;
  basis: string;
}

export function costModel(counts: RunCounts): {
  counts: RunCounts;
  lines: CostLine[];
  totalUsdPerMillionEvents: number;
} {
  const per = (value: number) => value / counts.accepted;
  const attempts = per(counts.processingAttempts);
  const duplicates = per(counts.httpDeliveries - counts.accepted);
  const relays = per(counts.relayBatches);
  const retries = Math.max(0, attempts - 1);

  // Claim shard: a new key seeks two key prefixes (relay_pending 0 and 1) and inserts one WITHOUT ROWID row; a
  // duplicate seeks and bumps an hourly counter; the relay reads the row and rewrites it as a tombstone; each
  // relay batch sets one alarm (a billed row).
  const doRowsRead = 1 + duplicates * 2 + 1;
  const doRowsWritten = 1 + duplicates + 1 + relays;
  // D1: the relay's insert (row + the (source, event_key) index); the consumer reads the receipt and commits it
  // in one update (no index touched). A retry adds an update that enters the retry index and an attempt row.
  const d1RowsRead = 1 + 1 + attempts;
  const d1RowsWritten = 2 + 1 + retries * 4;
  // Queues: one message per relay batch, written, read and deleted; a retried receipt travels in a new message.
  const queueOperations = relays * 3 + retries * 3;

  const line = (item: string, perEvent: number, unitPricePerMillion: number, basis: string): CostLine => ({
    item,
    perEvent,
    unitPricePerMillion,
    usdPerMillionEvents: perEvent * unitPricePerMillion,
    basis,
  });
  const lines = [
    line("Workers requests (deliveries)", per(counts.httpDeliveries), PRICES.workersRequestPerMillion, "measured"),
    line(
      "DO requests (claims + relay alarms)",
      per(counts.httpDeliveries) + relays,
      PRICES.durableObjectRequestPerMillion,
      "measured",
    ),
    line("DO SQLite rows read", doRowsRead, PRICES.rowsReadPerMillion, "derived"),
    line("DO SQLite rows written", doRowsWritten, PRICES.rowsWrittenPerMillion, "derived"),
    line("D1 rows read", d1RowsRead, PRICES.rowsReadPerMillion, "derived"),
    line("D1 rows written (receiver tables)", d1RowsWritten, PRICES.rowsWrittenPerMillion, "derived"),
    line("Queue operations", queueOperations, PRICES.queueOperationPerMillion, "derived from relay batches"),
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
    `counted: ${counts.accepted} accepted events, ${counts.httpDeliveries} deliveries, ${counts.relayBatches} relay batches, ` +
      `${counts.processingAttempts} processing attempts`,
    `${"item".padEnd(38)}${"per event".padStart(10)}${"$/M".padStart(10)}${"$/M events".padStart(12)}  basis`,
    ...rows,
    `${"total, beyond the Workers Paid inclusions".padEnd(58)}${`$${cost.totalUsdPerMillionEvents.toFixed(2)}`.padStart(12)}  (+ CPU time and DO duration, not modelled)`,
  ].join("\n");
}
