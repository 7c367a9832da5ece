// `capacity --rate R --body-bytes B [--key-retention D] [--payload-retention D] [--sql-window D] [--shards N]
// [--databases N] [--spread N] [--json]`:
// what a sustained rate needs of each store (claim shards, D1, R2), held against Cloudflare's published limits, and
// its cost at list prices, from the bench's measured per-event figures (src/capacity/model.ts). Reads only files:
// no receiver, no wrangler.
import { readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { CliError, EXIT } from "../errors.mjs";
import { importWorkerCode } from "../worker-code.mjs";

const ROOT = join(import.meta.dirname, "..", "..", "..");
/** Where the bench's meters phase writes the figures (docs/performance.md, "Capacity"). */
export const FIGURES_PATH = join(ROOT, "bench", "results", "per-event.json");

/**
 * The model and the one reading of a duration, bundled from the Worker's own source; `more` adds entry lines (check
 * adds the sources and the shard count as the Worker reads them).
 * @param {string[]} [more]
 */
export async function capacityCode(more = []) {
  return importWorkerCode(
    [
      'export * from "./src/capacity/model.ts";',
      'export * from "./src/capacity/per-event.ts";',
      'export * from "./src/capacity/size.ts";',
      'export * from "./src/capacity/source-capacity.ts";',
      'export { parseDuration } from "./src/lib/duration.ts";',
      ...more,
    ].join("\n"),
  );
}

/**
 * The per-event figures, checked; a missing or unreadable file is a setup problem named with its fix.
 * @param {any} code capacityCode()'s exports
 * @param {string} path
 */
export function readFigures(code, path) {
  const shown = relative(process.cwd(), path) || path;
  let text;
  try {
    text = readFileSync(path, "utf8");
  } catch {
    throw new CliError(
      `no per-event figures at ${shown}: the bench's meters phase writes them (npm run bench -- --only meters), or pass --figures <file>`,
      EXIT.setup,
    );
  }
  try {
    return code.perEventFigures(JSON.parse(text), shown);
  } catch (error) {
    const message =
      error instanceof SyntaxError ? `${shown} is not JSON (${error.message})` : /** @type {Error} */ (error).message;
    throw new CliError(message, EXIT.setup);
  }
}

/**
 * @param {{ rate?: string, bodyBytes?: string, keyRetention?: string, payloadRetention?: string, sqlWindow?: string,
 *   archiveRetention?: string, bodies?: string, shards?: string, databases?: string, spread?: string, figures?: string,
 *   json?: boolean }} options
 */
export async function capacity(options) {
  const code = await capacityCode();
  const number = (/** @type {string | undefined} */ value, /** @type {string} */ flag, /** @type {string} */ what) => {
    if (value === undefined) return null;
    const parsed = /^\s*-?\d+(\.\d+)?(e[+-]?\d+)?\s*$/i.test(value) ? Number(value) : Number.NaN;
    if (!Number.isFinite(parsed))
      throw new CliError(`${flag} must be ${what} (got ${JSON.stringify(value)})`, EXIT.usage);
    return parsed;
  };
  const duration = (/** @type {string | undefined} */ value, /** @type {string} */ flag) => {
    if (value === undefined) return null;
    const parsed = code.parseDuration(value);
    if (parsed === null)
      throw new CliError(
        `${flag} must be a duration such as "35d", "12h" or "90m" (got ${JSON.stringify(value)})`,
        EXIT.usage,
      );
    return parsed;
  };
  const rate = number(options.rate, "--rate", "a number of events a second, such as 1000");
  const bodyBytes = number(options.bodyBytes, "--body-bytes", "a number of bytes, such as 3000");
  if (rate === null || bodyBytes === null)
    throw new CliError("capacity needs --rate <events/s> and --body-bytes <bytes>", EXIT.usage);
  if (options.bodies !== undefined && options.bodies !== "r2" && options.bodies !== "d1")
    throw new CliError(`--bodies must be r2 or d1 (got ${JSON.stringify(options.bodies)})`, EXIT.usage);
  const input = {
    eventsPerSecond: rate,
    bodyBytes,
    keyRetentionMs: duration(options.keyRetention, "--key-retention") ?? code.DEFAULT_INPUT.keyRetentionMs,
    payloadRetentionMs:
      duration(options.payloadRetention, "--payload-retention") ?? code.DEFAULT_INPUT.payloadRetentionMs,
    sqlWindowMs: duration(options.sqlWindow, "--sql-window"),
    archiveRetentionMs: duration(options.archiveRetention, "--archive-retention"),
    bodies: options.bodies ?? code.DEFAULT_INPUT.bodies,
    shards: number(options.shards, "--shards", "a whole number of claim shards, such as 8"),
    databases: number(options.databases, "--databases", "a whole number of receipt databases, such as 4"),
    spread:
      number(options.spread, "--spread", "a whole number of databases a period is written to, such as 2") ??
      code.DEFAULT_INPUT.spread,
  };
  const figuresPath = options.figures ?? FIGURES_PATH;
  const figures = readFigures(code, figuresPath);
  let report;
  try {
    report = code.capacity(input, figures);
  } catch (error) {
    if (/** @type {Error} */ (error).name === "CapacityInputError")
      throw new CliError(/** @type {Error} */ (error).message, EXIT.usage);
    throw error;
  }
  if (options.json) {
    console.log(JSON.stringify({ figures: relative(ROOT, figuresPath) || figuresPath, ...report }, null, 2));
    return 0;
  }
  const { printCapacity } = await import("../capacity-format.mjs");
  printCapacity(report, relative(ROOT, figuresPath) || figuresPath, code.byteSize);
  return 0;
}
