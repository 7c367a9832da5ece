/**
 * The measured per-event figures the capacity model computes from: bench/results/per-event.json, written by the
 * bench's meters phase (docs/performance.md, "Meters"). The fields are agreed with the bench in one place, this
 * reader: it ignores fields it does not know (the bench may add more), fills an absent optional one from a stated
 * fallback, and refuses a file without the figures capacity cannot be computed without.
 */

/** A bad input to the model: its message names the input and what it should be. */
export class CapacityInputError extends Error {
  override name = "CapacityInputError";
}

/** Rows per event of one store, by the pipeline's stage. */
export interface StageRows {
  accept: number;
  relay: number;
  process: number;
  retention: number;
}

export interface PerEventFigures {
  measuredBy: { command: string; commit: string; at: string | null; note: string | null };
  /** Bytes of D1 one receipt keeps once its body is gone (dropped or never in D1), from VACUUMed page counts. */
  d1BytesPerReceipt: number;
  /** Bytes one claim's tombstone keeps in its shard. */
  shardBytesPerTombstone: number;
  /** Bytes of one receipt's lines in the R2 archive. */
  archiveBytesPerReceipt: number;
  rowsWritten: { d1: StageRows; durableObject: StageRows };
  rowsRead: { d1: StageRows; durableObject: StageRows };
  r2: { classA: number; classB: number };
  workersRequests: number;
  /** Claims, alarms and relay calls: also what one event asks of its shard's request rate. */
  durableObjectRequests: number;
  queueOperations: number;
  cpuMs: number;
  logLines: number;
  analyticsPoints: number;
  /** D1 calls (queries and batches) per event, for the writing database's query time; null when not measured. */
  d1Calls: number | null;
  /**
   * D1 execution time per event (ms, the runtime's `meta.duration` summed over the happy path's statements), for a
   * call that runs longer than the ~1 ms the query count assumes; null when not measured (the count alone is used).
   */
  d1ExecutionMs: number | null;
  /** Where the measured run kept bodies, when the file says. */
  bodiesIn: "d1" | "r2" | null;
  /** The bench's own all-in figure, for comparison. */
  allInUsdPerMillion: number | null;
  /** Each optional figure the file lacked, with the fallback used instead. */
  fallbacks: string[];
}

type Table = Record<string, unknown>;

const isTable = (value: unknown): value is Table => !!value && typeof value === "object" && !Array.isArray(value);
const isFigure = (value: unknown): value is number => typeof value === "number" && Number.isFinite(value) && value >= 0;

/** Reads the parsed JSON of the figures file; `where` names the file in every problem. */
export function perEventFigures(json: unknown, where: string): PerEventFigures {
  if (!isTable(json)) throw new CapacityInputError(`${where}: want a JSON object of per-event figures`);
  const problems: string[] = [];
  const fallbacks: string[] = [];
  const required = (table: Table, key: string, path: string): number => {
    if (isFigure(table[key])) return table[key];
    problems.push(`${path} must be a number, 0 or more (got ${JSON.stringify(table[key])})`);
    return 0;
  };
  const optional = (table: Table, key: string, path: string, fallback: number): number => {
    if (table[key] === undefined) {
      fallbacks.push(`${path} absent: ${fallback}`);
      return fallback;
    }
    return required(table, key, path);
  };
  const stages = (value: unknown, path: string, mustHave: boolean): StageRows => {
    if (!isTable(value)) {
      if (mustHave) problems.push(`${path} must be an object of accept, relay, process and retention`);
      else fallbacks.push(`${path} absent: 0`);
      return { accept: 0, relay: 0, process: 0, retention: 0 };
    }
    const stage = (key: string) => required(value, key, `${path}.${key}`);
    return { accept: stage("accept"), relay: stage("relay"), process: stage("process"), retention: stage("retention") };
  };
  const byStore = (key: "rowsWritten" | "rowsRead", mustHave: boolean) => {
    const value = isTable(json[key]) ? json[key] : {};
    if (!isTable(json[key]) && mustHave) problems.push(`${key} must be an object of d1 and durableObject`);
    return {
      d1: stages(value.d1, `${key}.d1`, mustHave),
      durableObject: stages(value.durableObject, `${key}.durableObject`, mustHave),
    };
  };

  const measuredBy = isTable(json.measuredBy) ? json.measuredBy : {};
  const text = (key: string) => (typeof measuredBy[key] === "string" ? (measuredBy[key] as string) : null);
  if (!text("command") || !text("commit"))
    problems.push("measuredBy must name the command and the commit that measured the figures");
  const d1BytesPerReceipt = required(json, "d1BytesPerReceipt", "d1BytesPerReceipt");
  const r2 = isTable(json.r2) ? json.r2 : {};
  const figures: PerEventFigures = {
    measuredBy: { command: text("command") ?? "", commit: text("commit") ?? "", at: text("at"), note: text("note") },
    d1BytesPerReceipt,
    shardBytesPerTombstone: required(json, "shardBytesPerTombstone", "shardBytesPerTombstone"),
    archiveBytesPerReceipt: optional(json, "archiveBytesPerReceipt", "archiveBytesPerReceipt", d1BytesPerReceipt),
    rowsWritten: byStore("rowsWritten", true),
    rowsRead: byStore("rowsRead", false),
    r2: { classA: optional(r2, "classA", "r2.classA", 0), classB: optional(r2, "classB", "r2.classB", 0) },
    workersRequests: optional(json, "workersRequests", "workersRequests", 1),
    durableObjectRequests: optional(json, "durableObjectRequests", "durableObjectRequests", 1),
    queueOperations: optional(json, "queueOperations", "queueOperations", 0),
    cpuMs: optional(json, "cpuMs", "cpuMs", 0),
    logLines: optional(json, "logLines", "logLines", 0),
    analyticsPoints: optional(json, "analyticsPoints", "analyticsPoints", 0),
    d1Calls: json.d1Calls === undefined ? noQueryTime(fallbacks) : required(json, "d1Calls", "d1Calls"),
    d1ExecutionMs:
      json.d1ExecutionMs === undefined ? noExecutionTime(fallbacks) : required(json, "d1ExecutionMs", "d1ExecutionMs"),
    bodiesIn: json.bodiesIn === "d1" || json.bodiesIn === "r2" ? json.bodiesIn : null,
    allInUsdPerMillion: isFigure(json.allInUsdPerMillion) ? json.allInUsdPerMillion : null,
    fallbacks,
  };
  if (problems.length > 0) throw new CapacityInputError(`${where}: ${problems.join("; ")}`);
  return figures;
}

function noQueryTime(fallbacks: string[]): null {
  fallbacks.push("d1Calls absent: the writing database's query time is not assessed");
  return null;
}

function noExecutionTime(fallbacks: string[]): null {
  fallbacks.push("d1ExecutionMs absent: query time is counted at about 1 ms a D1 call");
  return null;
}

export function stageTotal(rows: StageRows): number {
  return rows.accept + rows.relay + rows.process + rows.retention;
}
