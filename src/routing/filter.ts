import {
  $all,
  $and,
  $elemMatch,
  $eq,
  $exists,
  $gt,
  $gte,
  $in,
  $lt,
  $lte,
  $ne,
  $nin,
  $nor,
  $not,
  $options,
  $or,
  $size,
  createEqualsOperation,
  createQueryTester,
} from "sift";
import { readJsonOption } from "./config-json";
import { MAX_REGEX_SUBJECT_CHARS, regexProblem, regexStepCost } from "./regex";
import type { StepMeter } from "./steps";

/**
 * A route's filter: a MongoDB-style query (sift) over what the receiver knows of an event,
 * `{ body, headers, type, subject }`. Only the operators below exist: sift's `$where` (which compiles code with
 * `new Function`, refused by workerd and a way to run config as code) and `$type`/`$mod` are left out, and an
 * operator not listed is refused when config loads.
 */

/** What a filter sees: the body parsed as JSON (its text when it is not JSON), the kept headers, the identity. */
export interface FilterSubject {
  body: unknown;
  headers: Record<string, string>;
  type: string | null;
  subject: string | null;
}

/** `meter` counts the work of its regular expressions (src/routing/steps.ts); none is counted without one. */
export type EventFilter = (event: FilterSubject, meter?: StepMeter) => boolean;

const FIELDS = new Set(["body", "headers", "type", "subject"]);
const LOGICAL = new Set(["$and", "$or", "$nor"]);

/** The meter of the filter run under way: a filter is synchronous, so no other run can interleave. */
let counting: StepMeter | null = null;

/**
 * `$regex`, bounded (src/routing/regex.ts): refused at load when unsafe, never run on an over-long value, and each
 * run paid for in steps at the value's length.
 */
function boundedRegex(
  pattern: unknown,
  ownerQuery: Record<string, unknown>,
  options: Parameters<typeof createEqualsOperation>[2],
) {
  const flags = Object.hasOwn(ownerQuery, "$options") ? ownerQuery.$options : "";
  const problem = regexProblem(pattern, flags);
  if (problem) throw new FilterError(problem);
  const expression = new RegExp(pattern as string, flags as string);
  const stepCost = regexStepCost(pattern as string, flags as string);
  return createEqualsOperation(
    (value: unknown) => {
      if (typeof value !== "string" || value.length > MAX_REGEX_SUBJECT_CHARS) return false;
      counting?.charge(stepCost(value.length));
      return expression.test(value);
    },
    ownerQuery,
    options,
  );
}

/** A string test on the value, for the common cases a regular expression would otherwise be written for. */
function stringTest(name: string, test: (value: string, operand: string) => boolean) {
  return (operand: unknown, ownerQuery: unknown, options: Parameters<typeof createEqualsOperation>[2]) => {
    if (typeof operand !== "string") throw new FilterError(`${name} takes a string (got ${JSON.stringify(operand)})`);
    return createEqualsOperation(
      (value: unknown) => typeof value === "string" && test(value, operand),
      ownerQuery,
      options,
    );
  };
}

const operations = {
  $eq,
  $ne,
  $in,
  $nin,
  $gt,
  $gte,
  $lt,
  $lte,
  $exists,
  $and,
  $or,
  $nor,
  $not,
  $size,
  $all,
  $elemMatch,
  $regex: boundedRegex,
  // Read by $regex from its own query object; on its own it does nothing.
  $options,
  $startsWith: stringTest("$startsWith", (value, operand) => value.startsWith(operand)),
  $endsWith: stringTest("$endsWith", (value, operand) => value.endsWith(operand)),
  $contains: stringTest("$contains", (value, operand) => value.includes(operand)),
};

export class FilterError extends Error {}

/** Top-level keys must name a field of the event (a typo such as `data.type` would otherwise match nothing, quietly). */
function rootFieldProblems(query: Record<string, unknown>): string[] {
  const problems: string[] = [];
  for (const [key, value] of Object.entries(query)) {
    if (LOGICAL.has(key)) {
      if (!Array.isArray(value)) problems.push(`${key} takes a list of queries`);
      else for (const part of value) if (isPlainObject(part)) problems.push(...rootFieldProblems(part));
      continue;
    }
    if (key.startsWith("$")) {
      problems.push(`${key} cannot stand at the top of a filter: name a field (body, headers, type, subject) first`);
      continue;
    }
    const field = key.split(".")[0]!;
    if (!FIELDS.has(field))
      problems.push(`filter key ${JSON.stringify(key)} must start with body, headers, type or subject`);
  }
  return problems;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * A filter from config: a table, or the same query as a JSON string. Checked entirely here, once per isolate, so
 * a mistake takes the source out of service when config loads instead of failing events one by one.
 */
export function compileFilter(value: unknown): { ok: true; filter: EventFilter } | { ok: false; problem: string } {
  const read = readJsonOption(value, "filter");
  if (!read.ok) return read;
  const query = read.value;
  if (!isPlainObject(query)) return { ok: false, problem: "filter must be a table (a MongoDB-style query)" };
  const problems = rootFieldProblems(query);
  if (problems.length > 0) return { ok: false, problem: `filter: ${problems.join("; ")}` };
  try {
    const tester = createQueryTester<FilterSubject, unknown>(query, { operations });
    return {
      ok: true,
      filter: (event, meter) => {
        counting = meter ?? null;
        try {
          return tester(event);
        } finally {
          counting = null;
        }
      },
    };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return { ok: false, problem: `filter: ${message.replace(/^Unsupported operation: /, "unsupported operator ")}` };
  }
}
