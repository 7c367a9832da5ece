import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import type { PerEvent } from "./meters.ts";
import { repoRoot } from "./setup.ts";
import { STAGES, type Stage, type StageSplit } from "./stages.ts";
import type { VacuumedBytes } from "./vacuumed-bytes.ts";

/**
 * The per-event figures the capacity model reads (`bench/results/per-event.json`; fields agreed with it: stage
 * rows by store, bytes per receipt and tombstone, operations, allInUsdPerMillion), and the stage table the meters
 * phase prints. Pure but for the file write and reading the commit.
 */

export interface MeasuredLife {
  stages: StageSplit;
  /** Retention's per-event units: the cron past payload retention (body drop) and past dedupe retention (deletes). */
  bodyDrop: PerEvent;
  deletes: PerEvent;
  retentionEvents: number;
  /** The happy path of the demo source (the figure the all-in price is built on). */
  happy: PerEvent;
  happyEvents: number;
  /** R2 operations of a large body (above the R2 threshold) and the share of such bodies priced in. */
  largeBody: { r2ClassA: number; r2ClassB: number };
  largeShare: number;
  cpuMs: number;
  allInUsdPerMillion: number;
  bytes: {
    withBody: Record<"small" | "typical", VacuumedBytes>;
    withoutBody: Record<"small" | "typical", VacuumedBytes>;
    tombstone: VacuumedBytes;
  };
}

type StoreRows = Record<"d1" | "durableObject", Record<Stage, number>>;

function stageUnits(life: MeasuredLife, stage: Stage): PerEvent {
  if (stage !== "retention") return life.stages[stage];
  const sum = { ...life.bodyDrop };
  for (const key of Object.keys(sum) as (keyof PerEvent)[]) sum[key] += life.deletes[key];
  return sum;
}

/** Rows per event by store and stage; `written` with alarm writes included in the Durable Object's. */
export function rowsByStage(life: MeasuredLife, kind: "written" | "read"): StoreRows {
  const rows: StoreRows = { d1: {} as Record<Stage, number>, durableObject: {} as Record<Stage, number> };
  for (const stage of STAGES) {
    const units = stageUnits(life, stage);
    rows.d1[stage] = round(kind === "written" ? units.d1RowsWritten : units.d1RowsRead);
    rows.durableObject[stage] = round(kind === "written" ? units.doRowsWritten : units.doRowsRead);
  }
  return rows;
}

/** R2 operations per event: the share of large bodies at their measured operations, the rest at the happy path's. */
function r2PerEvent(life: MeasuredLife): { classA: number; classB: number } {
  const mix = (large: number, small: number) => round(life.largeShare * large + (1 - life.largeShare) * small);
  return {
    classA: mix(life.largeBody.r2ClassA, life.happy.r2ClassA),
    classB: mix(life.largeBody.r2ClassB, life.happy.r2ClassB),
  };
}

function round(value: number): number {
  return Math.round(value * 1000) / 1000;
}

function commitOf(): string {
  const git = (...args: string[]) => execFileSync("git", args, { cwd: repoRoot, encoding: "utf8" }).trim();
  try {
    return `${git("rev-parse", "--short", "HEAD")}${git("status", "--porcelain", "--", "src", "migrations", "wrangler.toml") ? " (src modified)" : ""}`;
  } catch {
    return "unknown";
  }
}

export function perEventFigures(life: MeasuredLife, command: string) {
  const { bytes } = life;
  const bodyRow = (body: "small" | "typical") => ({
    bodyBytes: Math.round(bytes.withBody[body].meanBodyBytes ?? 0),
    withBody: Math.round(bytes.withBody[body].perRow),
    afterBodyDrop: Math.round(bytes.withoutBody[body].perRow),
  });
  return {
    measuredBy: {
      command,
      commit: commitOf(),
      at: new Date().toISOString(),
      note:
        `accept: ${life.stages.events} events with the relay held back; relay and process: as many on a runtime whose queue ` +
        `consumer waits, read apart (alarm writes where they happen); retention: the cron past 7 and 35 days over ` +
        `${life.retentionEvents} events, its fixed work included; bytes: VACUUMed page_count × page_size less the same ` +
        `database without the rows, per row held (${bytes.withBody.small.rows} receipts per body size)`,
    },
    events: life.happyEvents,
    // Where bodies under the R2 threshold were kept: in the receipt row, or elsewhere (R2 segments).
    bodiesIn: (bytes.withBody.small.meanBodyBytes ?? 0) > 0 ? "d1" : "r2",
    d1BytesPerReceipt: Math.round(bytes.withoutBody.small.perRow),
    shardBytesPerTombstone: Math.round(bytes.tombstone.perRow),
    d1BytesPerReceiptByBody: [bodyRow("small"), bodyRow("typical")],
    rowsWritten: rowsByStage(life, "written"),
    rowsRead: rowsByStage(life, "read"),
    retentionRowsWritten: {
      bodyDrop: { d1: round(life.bodyDrop.d1RowsWritten), durableObject: round(life.bodyDrop.doRowsWritten) },
      deletes: { d1: round(life.deletes.d1RowsWritten), durableObject: round(life.deletes.doRowsWritten) },
    },
    r2: r2PerEvent(life),
    workersRequests: round(life.happy.workersRequests),
    /** The happy path's D1 calls (statements and batches): what one database's query time is spent on. */
    d1Calls: round(life.happy.d1Calls),
    /** Their execution time (ms, meta.duration: the local SQLite's), for calls longer than the ~1 ms a query count assumes. */
    d1ExecutionMs: round(life.happy.d1DurationMs),
    durableObjectRequests: round(life.happy.doRequests + life.bodyDrop.doRequests + life.deletes.doRequests),
    queueOperations: round(life.happy.queueOperations),
    cpuMs: round(life.cpuMs),
    logLines: round(life.happy.logLines + life.bodyDrop.logLines + life.deletes.logLines),
    analyticsPoints: round(life.happy.analyticsPoints + life.bodyDrop.analyticsPoints + life.deletes.analyticsPoints),
    allInUsdPerMillion: Math.round(life.allInUsdPerMillion * 100) / 100,
  };
}

export type PerEventFigures = ReturnType<typeof perEventFigures>;

/** Writes the figures file: the before's shape, or the after's (its retention split by mechanism, not by step). */
export function writePerEventFile(path: string, figures: object): void {
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, `${JSON.stringify(figures, null, 2)}\n`);
}

/** The stage table as the phase prints it (and docs/performance.md quotes it). */
/** The stage table; any figures with the stage rows and the per-event operations (the before's or the after's). */
export function formatStageTable(
  figures: Pick<
    PerEventFigures,
    | "rowsWritten"
    | "rowsRead"
    | "r2"
    | "queueOperations"
    | "durableObjectRequests"
    | "workersRequests"
    | "allInUsdPerMillion"
  >,
): string {
  const line = (cells: (string | number)[]) => `| ${cells.join(" | ")} |`;
  const { rowsWritten, rowsRead } = figures;
  return [
    "rows per event by store and stage (Durable Object rows written include alarm writes):",
    line(["rows per event", ...STAGES, "all"]),
    line(["---", ...STAGES.map(() => "---:"), "---:"]),
    ...(
      [
        ["D1 written", rowsWritten.d1],
        ["Durable Objects written", rowsWritten.durableObject],
        ["D1 read", rowsRead.d1],
        ["Durable Objects read", rowsRead.durableObject],
      ] as const
    ).map(([name, byStage]) =>
      line([
        name,
        ...STAGES.map((stage) => byStage[stage].toFixed(3)),
        round(STAGES.reduce((sum, stage) => sum + byStage[stage], 0)).toFixed(3),
      ]),
    ),
    `per event: R2 class A ${figures.r2.classA} · class B ${figures.r2.classB}; queue operations ${figures.queueOperations}; ` +
      `Durable Object requests ${figures.durableObjectRequests}; Workers requests ${figures.workersRequests}; ` +
      `allInUsdPerMillion ${figures.allInUsdPerMillion}`,
  ].join("\n");
}
