import { type Schema, Validator } from "@cfworker/json-schema";
import { readJsonOption } from "./config-json";
import { boundSchemaDocument, guardFailure } from "./schema-bounds";
import { countApplications, countedCheck } from "./schema-steps";
import { MAX_ROUTE_STEPS, StepBudgetExceeded, StepMeter } from "./steps";

/**
 * A route's schema: JSON Schema (draft 2020-12) checked with @cfworker/json-schema, an interpreter made for
 * Workers (no code generation). A body that does not match is dead-lettered with the validation errors.
 */

/** `stopped`: the check ran past its budget of steps (src/routing/schema-steps.ts) rather than finding a mismatch. */
export type SchemaVerdict = { ok: true } | { ok: false; errors: string[]; stopped?: true };

export interface EventSchema {
  /** `meter` counts the work; a route's rules share one per event (a fresh one when none is given). */
  check(body: unknown, meter?: StepMeter): SchemaVerdict;
}

const MAX_REPORTED_ERRORS = 5;

export function compileSchema(value: unknown): { ok: true; schema: EventSchema } | { ok: false; problem: string } {
  const read = readJsonOption(value, "schema");
  if (!read.ok) return read;
  const document = read.value;
  if (document === null || typeof document !== "object" || Array.isArray(document))
    return { ok: false, problem: "schema must be a table (a JSON Schema)" };
  // uniqueItems, pattern and format run only within bounds (src/routing/schema-bounds.ts).
  const bounded = boundSchemaDocument(document);
  if (!bounded.ok) return { ok: false, problem: `schema: ${bounded.problems.join("; ")}` };
  let validator: Validator;
  try {
    validator = new Validator(bounded.document as Schema, "2020-12", false);
    // A dangling $ref or an unreadable keyword throws only when validation reaches it: reach it now.
    validator.validate(null);
    validator.validate({});
  } catch (error) {
    return { ok: false, problem: `schema cannot be used: ${error instanceof Error ? error.message : String(error)}` };
  }
  countApplications(bounded.document);
  return {
    ok: true,
    schema: {
      check(body, meter = new StepMeter(MAX_ROUTE_STEPS)) {
        let result: ReturnType<Validator["validate"]>;
        try {
          result = countedCheck(meter, () => validator.validate(body));
        } catch (error) {
          if (error instanceof StepBudgetExceeded) return { ok: false, errors: [error.message], stopped: true };
          throw error;
        }
        if (result.valid) return { ok: true };
        // The library reports each failure with its parents ("properties did not match"): the leaves say why. An
        // `if` failure is the parent of its then/else errors, though its location is not theirs. Parents are found
        // by their locations' prefixes, in one pass: a body can fail in thousands of places.
        const parents = new Set<string>();
        for (const { keywordLocation } of result.errors) {
          for (let end = keywordLocation.lastIndexOf("/"); end > 0; end = keywordLocation.lastIndexOf("/", end - 1))
            parents.add(keywordLocation.slice(0, end));
        }
        const leaves = result.errors.filter((error) => error.keyword !== "if" && !parents.has(error.keywordLocation));
        const errors = leaves
          .slice(0, MAX_REPORTED_ERRORS)
          .map(
            (error) =>
              guardFailure(error.keywordLocation, error.instanceLocation) ??
              `${error.instanceLocation}: ${error.error}`,
          );
        if (leaves.length > MAX_REPORTED_ERRORS) errors.push(`and ${leaves.length - MAX_REPORTED_ERRORS} more`);
        return { ok: false, errors };
      },
    },
  };
}
