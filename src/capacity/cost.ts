import type { CapacityInput } from "./input";
import { BYTES_PER_PRICED_GB, DAY_MS, DAYS_PER_MONTH } from "./limits";
import { type PerEventFigures, stageTotal } from "./per-event";
import { ALL_IN_PRICES, DURABLE_OBJECT_BILLED_GB, PRICES } from "./prices";

/**
 * What a sustained rate costs a month and per million events at list prices (./prices.ts), beyond the plan's
 * monthly inclusions and its $5 base (neither is subtracted, so every line but the shards' duration scales with
 * the rate). Per-event units are the measured figures; storage is each byte kept for its window, as the bench's
 * all-in figure counts it (bench/lib/all-in.ts): a tombstone 1.5 key windows on average.
 */

export interface CostLine {
  item: string;
  usdPerMonth: number;
  usdPerMillion: number;
}

export interface CostReport {
  eventsPerMonth: number;
  lines: CostLine[];
  usdPerMonth: number;
  usdPerMillion: number;
}

const SECONDS_PER_MONTH = DAYS_PER_MONTH * (DAY_MS / 1000);

export function monthlyCost(
  input: CapacityInput,
  figures: PerEventFigures,
  held: { shards: number; sqlDays: number; archiveDays: number },
): CostReport {
  const eventsPerMonth = input.eventsPerSecond * SECONDS_PER_MONTH;
  const millions = eventsPerMonth / 1e6;
  const months = (days: number) => days / DAYS_PER_MONTH;
  const gbMonths = (bytes: number, days: number) => (bytes / BYTES_PER_PRICED_GB) * months(days);
  const payloadDays = input.payloadRetentionMs / DAY_MS;
  const keyDays = input.keyRetentionMs / DAY_MS;
  const { rowsWritten, rowsRead } = figures;

  // Per event, in USD per million events.
  const perEvent: [string, number][] = [
    [
      "requests: Workers, Durable Objects",
      figures.workersRequests * PRICES.workersRequestPerMillion +
        figures.durableObjectRequests * PRICES.durableObjectRequestPerMillion,
    ],
    [
      "D1 rows written and read",
      stageTotal(rowsWritten.d1) * PRICES.rowsWrittenPerMillion + stageTotal(rowsRead.d1) * PRICES.rowsReadPerMillion,
    ],
    [
      "Durable Object rows written and read",
      stageTotal(rowsWritten.durableObject) * PRICES.rowsWrittenPerMillion +
        stageTotal(rowsRead.durableObject) * PRICES.rowsReadPerMillion,
    ],
    ["queue operations", figures.queueOperations * PRICES.queueOperationPerMillion],
    [
      "R2 operations",
      figures.r2.classA * ALL_IN_PRICES.r2ClassAPerMillion + figures.r2.classB * ALL_IN_PRICES.r2ClassBPerMillion,
    ],
    [
      "logs, Analytics Engine points, CPU",
      figures.logLines * ALL_IN_PRICES.logLinePerMillion +
        figures.analyticsPoints * ALL_IN_PRICES.analyticsPointPerMillion +
        figures.cpuMs * ALL_IN_PRICES.cpuMsPerMillion,
    ],
    [
      "storage: D1 (receipts, bodies kept there)",
      1e6 *
        ALL_IN_PRICES.d1StoragePerGbMonth *
        (gbMonths(figures.d1BytesPerReceipt, held.sqlDays) +
          (input.bodies === "d1" ? gbMonths(input.bodyBytes, Math.min(payloadDays, held.sqlDays)) : 0)),
    ],
    [
      "storage: claim shards (tombstones)",
      1e6 * ALL_IN_PRICES.durableObjectStoragePerGbMonth * gbMonths(figures.shardBytesPerTombstone, 1.5 * keyDays),
    ],
    [
      "storage: R2 (bodies, archive)",
      1e6 *
        ALL_IN_PRICES.r2StoragePerGbMonth *
        ((input.bodies === "r2" ? gbMonths(input.bodyBytes, payloadDays) : 0) +
          gbMonths(figures.archiveBytesPerReceipt, Math.max(0, held.archiveDays - held.sqlDays))),
    ],
  ];
  const lines: CostLine[] = perEvent.map(([item, usdPerMillion]) => ({
    item,
    usdPerMillion,
    usdPerMonth: usdPerMillion * millions,
  }));
  // Not per event: each shard is billed for every second it is awake, and a busy source's shards never sleep.
  const durationUsdPerMonth =
    held.shards *
    DURABLE_OBJECT_BILLED_GB *
    SECONDS_PER_MONTH *
    (ALL_IN_PRICES.durableObjectDurationPerMillionGbSeconds / 1e6);
  lines.push({
    item: `Durable Object duration (${held.shards} shards awake around the clock)`,
    usdPerMonth: durationUsdPerMonth,
    usdPerMillion: durationUsdPerMonth / millions,
  });
  const usdPerMonth = lines.reduce((sum, line) => sum + line.usdPerMonth, 0);
  return { eventsPerMonth, lines, usdPerMonth, usdPerMillion: usdPerMonth / millions };
}
