// How `capacity` prints the model's report (src/capacity/model.ts): the stores, the limits with the binding one
// marked, the cost. Sizes are the model's own byteSize (src/capacity/size.ts), in the units the limits are stated in.

const DAY_MS = 86_400_000;

/** @param {number} value */
const count = (value) => Math.round(value).toLocaleString("en-US");
/** @param {number} ms */
const days = (ms) => `${+(ms / DAY_MS).toFixed(2)}d`;
/** @param {number} fraction */
const percent = (fraction) => `${fraction >= 10 ? count(fraction * 100) : +(fraction * 100).toFixed(1)} %`;
/** @param {number} usd */
const dollars = (usd) => `$${usd >= 1000 ? count(usd) : usd.toFixed(2)}`;

/**
 * @param {(bytes: number) => string} size
 * @param {{ limit: string, used: number, max: number, unit: string }} entry
 * @param {number} value
 */
function inUnit(size, entry, value) {
  if (entry.unit === "bytes") return size(value);
  if (entry.unit === "shards") return count(value);
  const figure = value >= 100 ? count(value) : +value.toFixed(1);
  return entry.unit === "ms/s" ? `${figure} ms/s` : `${figure}/s`;
}

/**
 * @param {any} report capacity()'s report
 * @param {string} figuresPath
 * @param {(bytes: number) => string} size the model's byteSize
 */
export function printCapacity(report, figuresPath, size) {
  const { input, shards, d1, r2, cost } = report;
  const window = input.sqlWindowMs === null ? `${days(input.keyRetentionMs)} (no SQL window)` : days(input.sqlWindowMs);
  console.log(
    `capacity of one source at ${count(input.eventsPerSecond)} events/s, ${count(input.bodyBytes)}-byte bodies in ${input.bodies === "r2" ? "R2" : "D1"}; ` +
      `keys kept ${days(input.keyRetentionMs)}, bodies ${days(input.payloadRetentionMs)}, receipts in D1 ${window}`,
  );
  console.log(`per-event figures: ${figuresPath} (${report.measuredBy.command}, at ${report.measuredBy.commit})`);
  console.log("");
  const archive =
    input.sqlWindowMs === null
      ? "— (no SQL window: receipts stay in D1)"
      : `${size(r2.archiveBytes)} (receipts from ${days(input.sqlWindowMs)} to ${days(input.archiveRetentionMs ?? input.keyRetentionMs)})`;
  const rows = [
    [
      "claim shards",
      `${size(shards.tombstoneBytes)} of tombstones at the fullest`,
      `${count(shards.needed)} needed (${count(shards.neededForStorage)} for storage, ${count(shards.neededForRequests)} for requests)` +
        (input.shards === null ? "" : `; ${count(input.shards)} configured`),
    ],
    [
      "D1",
      `${size(d1.bytes)} (${days(d1.daysHeld * DAY_MS)} of receipts${d1.bodyBytes > 0 ? ", bodies" : ""})`,
      `${count(d1.databasesNeeded)} database${d1.databasesNeeded === 1 ? "" : "s"} of 10 GB needed` +
        (d1.queriesPerSecond === null
          ? ""
          : `; ${+d1.queriesPerSecond.toFixed(1)} queries/s, ${+d1.queryMsPerSecond.toFixed(1)} ms of query time a second` +
            (input.spread > 1
              ? `; ${+d1.queriesPerSecondPerDatabase.toFixed(1)} queries/s and ${+d1.queryMsPerSecondPerDatabase.toFixed(1)} ms/s each of the ${input.spread} a period is written to`
              : "")),
    ],
    ["R2 bodies", input.bodies === "r2" ? size(r2.bodyBytes) : "— (bodies kept in D1)", "no published limit"],
    ["R2 archive", archive, "no published limit"],
  ];
  printTable(["store", "holds", "needs"], rows);
  console.log("");
  printTable(
    ["limit", "used", "max", "fill", ""],
    report.limits.map((/** @type {any} */ entry) => [
      entry.limit,
      inUnit(size, entry, entry.used),
      inUnit(size, entry, entry.max),
      percent(entry.fill),
      entry === report.limits.find((/** @type {any} */ each) => each.limit === report.binding.limit) ? "← binds" : "",
    ]),
  );
  console.log("");
  console.log(
    report.fits
      ? `fits: the binding limit is ${report.binding.limit}, at ${percent(report.binding.fill)}`
      : `does not fit: ${report.binding.limit} at ${percent(report.binding.fill)}: ${report.binding.change}`,
  );
  console.log("");
  printTable(
    ["cost at list prices (before the plan's inclusions and $5 base)", "per month", "per million"],
    [
      ...cost.lines.map((/** @type {any} */ line) => [
        line.item,
        dollars(line.usdPerMonth),
        dollars(line.usdPerMillion),
      ]),
      [
        `total (${count(cost.eventsPerMonth / 1e6)} million events a 30-day month)`,
        dollars(cost.usdPerMonth),
        dollars(cost.usdPerMillion),
      ],
    ],
  );
  for (const note of report.notes) console.log(`note: ${note}`);
}

/**
 * Left-aligned first column, the rest right-aligned except the last of the stores' table.
 * @param {string[]} header
 * @param {string[][]} rows
 */
function printTable(header, rows) {
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column].length)));
  const line = (/** @type {string[]} */ cells) =>
    cells
      .map((cell, column) =>
        column === 0 || column === cells.length - 1 ? cell.padEnd(widths[column]) : cell.padStart(widths[column]),
      )
      .join("  ")
      .trimEnd();
  console.log(line(header));
  for (const row of rows) console.log(line(row));
}
