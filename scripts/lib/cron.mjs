// Cron expressions as Cloudflare's [triggers] crons use them (five fields: minute hour day-of-month month
// day-of-week, UTC), enough for the local scheduler in scripts/dev.mjs: numbers, `*`, ranges, lists and steps,
// plus month and weekday names. Anything else is reported rather than guessed.

const FIELDS = [
  { name: "minute", min: 0, max: 59 },
  { name: "hour", min: 0, max: 23 },
  { name: "day of month", min: 1, max: 31 },
  {
    name: "month",
    min: 1,
    max: 12,
    names: ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"],
  },
  { name: "day of week", min: 0, max: 7, names: ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"] },
];

/**
 * @param {string} text one field
 * @param {{ name: string, min: number, max: number, names?: string[] }} field
 * @returns {Set<number>}
 */
function parseField(text, field) {
  const values = new Set();
  const number = (/** @type {string} */ token) => {
    const named = field.names?.indexOf(token.toUpperCase()) ?? -1;
    const value = named >= 0 ? named + (field.name === "month" ? 1 : 0) : /^\d+$/.test(token) ? Number(token) : NaN;
    if (!(value >= field.min && value <= field.max))
      throw new Error(`${field.name} ${JSON.stringify(token)} is out of range`);
    return value;
  };
  for (const part of text.split(",")) {
    const [range, stepText] = part.split("/");
    const step = stepText === undefined ? 1 : Number(stepText);
    if (!Number.isInteger(step) || step < 1)
      throw new Error(`${field.name} step ${JSON.stringify(stepText)} is not a positive number`);
    let [from, to] = [field.min, field.max];
    if (range !== "*") {
      const [low, high] = range.split("-");
      from = number(low);
      to = high === undefined ? (stepText === undefined ? from : field.max) : number(high);
    }
    for (let value = from; value <= to; value += step) values.add(value);
  }
  // Sunday is both 0 and 7.
  if (field.name === "day of week" && values.has(7)) values.add(0);
  return values;
}

/**
 * @param {string} expression e.g. "*\/5 * * * *"
 * @returns {(at: Date) => boolean} whether the schedule fires in `at`'s minute (UTC)
 */
export function parseCron(expression) {
  const parts = expression.trim().split(/\s+/);
  if (parts.length !== 5) throw new Error(`${JSON.stringify(expression)} does not have five fields`);
  const [minutes, hours, days, months, weekdays] = parts.map((part, index) => parseField(part, FIELDS[index]));
  const dayRestricted = parts[2] !== "*";
  const weekdayRestricted = parts[4] !== "*";
  return (at) => {
    if (!minutes.has(at.getUTCMinutes()) || !hours.has(at.getUTCHours()) || !months.has(at.getUTCMonth() + 1))
      return false;
    const dayMatches = days.has(at.getUTCDate());
    const weekdayMatches = weekdays.has(at.getUTCDay());
    // Classic cron: when both day fields are restricted, either one matching is enough.
    return dayRestricted && weekdayRestricted ? dayMatches || weekdayMatches : dayMatches && weekdayMatches;
  };
}

/** "30s", "2m", "1h" → milliseconds, or null. */
export function parseEvery(/** @type {string} */ text) {
  const match = /^(\d+)\s*(s|m|h)$/.exec(text.trim());
  if (!match || Number(match[1]) === 0) return null;
  return Number(match[1]) * { s: 1000, m: 60_000, h: 3_600_000 }[/** @type {"s" | "m" | "h"} */ (match[2])];
}
