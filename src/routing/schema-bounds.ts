import { MAX_REGEX_SUBJECT_CHARS, regexProblem } from "./regex";

/**
 * What a route's schema may cost on a body, settled when config loads. @cfworker/json-schema is linear in the body
 * for every keyword but two: `uniqueItems` compares every pair of items, and `pattern` (with the regex-based
 * `format`s) runs a backtracking regex on a string of any length. So `uniqueItems` is taken only beside a small
 * `maxItems`, and both are moved under a guard that lets them run only on inputs within those bounds: a longer
 * array or string fails the schema (on its length) instead of reaching the costly check.
 */

/** uniqueItems on n items costs n²/2 comparisons: accepted only beside a maxItems of at most this. */
export const MAX_UNIQUE_ITEMS = 100;

/** Keywords whose values are data, not schemas: their objects are never read as schemas. */
export const DATA_KEYWORDS = new Set(["enum", "const", "default", "examples"]);
/** Keywords whose values map names to schemas: the map itself is not a schema (a property may be named `pattern`). */
export const SCHEMA_MAPS = new Set(["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"]);

/** JSON Schema's `if`/`then`/`else`, built as entries: a literal with a `then` key would pass for a promise. */
function conditional(condition: object, then: object, otherwise?: object): object {
  const entries: [string, object][] = [
    ["if", condition],
    ["then", then],
  ];
  if (otherwise) entries.push(["else", otherwise]);
  return Object.fromEntries(entries);
}

/** A schema node's string checks, guarded by length: `if` short enough `then` check, `else` fail on the length. */
function lengthGuard(checks: Record<string, unknown>): object {
  return conditional({ maxLength: MAX_REGEX_SUBJECT_CHARS }, checks, { maxLength: MAX_REGEX_SUBJECT_CHARS });
}

/** The node's own maxItems fails a longer array; the guard keeps uniqueItems from ever comparing one. */
function uniqueItemsGuard(maxItems: number): object {
  return conditional({ maxItems }, { uniqueItems: true });
}

/** The bounded copy of one schema node (and everything under it), and the problems found on the way. */
function boundNode(node: unknown, problems: string[]): unknown {
  if (Array.isArray(node)) return node.map((item) => boundNode(item, problems));
  if (node === null || typeof node !== "object") return node;
  const bounded: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(node)) {
    if (DATA_KEYWORDS.has(key)) bounded[key] = value;
    else if (SCHEMA_MAPS.has(key) && value !== null && typeof value === "object" && !Array.isArray(value)) {
      bounded[key] = Object.fromEntries(
        Object.entries(value).map(([name, schema]) => [name, boundNode(schema, problems)]),
      );
    } else bounded[key] = boundNode(value, problems);
  }
  if (bounded.patternProperties && typeof bounded.patternProperties === "object") {
    for (const key of Object.keys(bounded.patternProperties)) {
      const problem = regexProblem(key);
      if (problem) problems.push(`patternProperties: ${problem}`);
    }
  }
  const guards: unknown[] = [];
  const checks: Record<string, unknown> = {};
  if (typeof bounded.pattern === "string") {
    const problem = regexProblem(bounded.pattern);
    if (problem) problems.push(`pattern: ${problem}`);
    checks.pattern = bounded.pattern;
    delete bounded.pattern;
  }
  if (typeof bounded.format === "string") {
    checks.format = bounded.format;
    delete bounded.format;
  }
  if (Object.keys(checks).length > 0) guards.push(lengthGuard(checks));
  if (bounded.uniqueItems === true) {
    const { maxItems } = bounded;
    if (typeof maxItems !== "number" || maxItems > MAX_UNIQUE_ITEMS) {
      problems.push(
        `uniqueItems compares every pair of items: give the same schema a maxItems of at most ${MAX_UNIQUE_ITEMS}, or check uniqueness in the destination`,
      );
    } else guards.push(uniqueItemsGuard(maxItems));
    delete bounded.uniqueItems;
  }
  if (guards.length > 0) bounded.allOf = [...(Array.isArray(bounded.allOf) ? bounded.allOf : []), ...guards];
  return bounded;
}

/** The document as the validator gets it (guards in place), or why it cannot be used. */
export function boundSchemaDocument(
  document: object,
): { ok: true; document: object } | { ok: false; problems: string[] } {
  const problems: string[] = [];
  const bounded = boundNode(document, problems) as object;
  return problems.length > 0 ? { ok: false, problems } : { ok: true, document: bounded };
}

/** A guard's failure (the `else` under a guard's `allOf`) told as what it is: an input over a bound. */
export function guardFailure(keywordLocation: string, instanceLocation: string): string | null {
  if (/\/allOf\/\d+\/else\/maxLength$/.test(keywordLocation))
    return `${instanceLocation}: a string over ${MAX_REGEX_SUBJECT_CHARS} characters, more than a pattern or format reads`;
  return null;
}
