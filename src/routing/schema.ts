import { type Schema, Validator } from "@cfworker/json-schema";
import { readJsonOption } from "./config-json";
import { regexProblem } from "./regex";

/**
 * A route's schema: JSON Schema (draft 2020-12) checked with @cfworker/json-schema, an interpreter made for
 * Workers (no code generation). A body that does not match is dead-lettered with the validation errors.
 */

export type SchemaVerdict = { ok: true } | { ok: false; errors: string[] };

export interface EventSchema {
  check(body: unknown): SchemaVerdict;
}

const MAX_REPORTED_ERRORS = 5;

/** `pattern` and `patternProperties` run on body text: the same bounds as a filter's $regex. */
function patternProblems(node: unknown, problems: string[]): void {
  if (Array.isArray(node)) {
    for (const item of node) patternProblems(item, problems);
    return;
  }
  if (node === null || typeof node !== "object") return;
  const table = node as Record<string, unknown>;
  if (typeof table.pattern === "string") {
    const problem = regexProblem(table.pattern);
    if (problem) problems.push(`pattern: ${problem}`);
  }
  if (table.patternProperties && typeof table.patternProperties === "object") {
    for (const key of Object.keys(table.patternProperties)) {
      const problem = regexProblem(key);
      if (problem) problems.push(`patternProperties: ${problem}`);
    }
  }
  for (const value of Object.values(table)) patternProblems(value, problems);
}

export function compileSchema(value: unknown): { ok: true; schema: EventSchema } | { ok: false; problem: string } {
  const read = readJsonOption(value, "schema");
  if (!read.ok) return read;
  const document = read.value;
  if (document === null || typeof document !== "object" || Array.isArray(document))
    return { ok: false, problem: "schema must be a table (a JSON Schema)" };
  const problems: string[] = [];
  patternProblems(document, problems);
  if (problems.length > 0) return { ok: false, problem: `schema: ${problems.join("; ")}` };
  let validator: Validator;
  try {
    validator = new Validator(document as Schema, "2020-12", false);
    // A dangling $ref or an unreadable keyword throws only when validation reaches it: reach it now.
    validator.validate(null);
    validator.validate({});
  } catch (error) {
    return { ok: false, problem: `schema cannot be used: ${error instanceof Error ? error.message : String(error)}` };
  }
  return {
    ok: true,
    schema: {
      check(body) {
        const result = validator.validate(body);
        if (result.valid) return { ok: true };
        // The library reports each failure with its parents ("properties did not match"): the leaves say why.
        const leaves = result.errors.filter(
          (error) =>
            !result.errors.some(
              (other) => other !== error && other.keywordLocation.startsWith(`${error.keywordLocation}/`),
            ),
        );
        const errors = leaves.slice(0, MAX_REPORTED_ERRORS).map((error) => `${error.instanceLocation}: ${error.error}`);
        if (leaves.length > MAX_REPORTED_ERRORS) errors.push(`and ${leaves.length - MAX_REPORTED_ERRORS} more`);
        return { ok: false, errors };
      },
    },
  };
}
