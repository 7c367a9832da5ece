// The minified build of the same release: a third of the bytes of jsonata.js (mostly its comments) in the Worker bundle.
import jsonata from "jsonata/jsonata.min.js";
import { BoundedRegExp, evaluateCounted } from "./jsonata-bounds";
import { regexProblem } from "./regex";
import { MAX_ROUTE_STEPS, StepBudgetExceeded, StepMeter } from "./steps";

/**
 * A route's transform: a JSONata expression evaluated over the event body, whose result (as JSON) is what the
 * route is given instead of the original bytes. JSONata is an interpreter (no `eval`, no `new Function`); its own
 * guardrails bound depth and sequence length, its work is counted in steps (src/routing/jsonata-bounds.ts: never a
 * clock, which does not advance while a deployed Worker runs), and the result's size is bounded here.
 */

const TRANSFORM_MAX_DEPTH = 200;
const TRANSFORM_MAX_SEQUENCE = 100_000;
const MAX_EXPRESSION_CHARS = 10_000;
export const MAX_TRANSFORM_OUTPUT_BYTES = 256 * 1024;

/** What an expression may read besides the body (`$`): `$type`, `$subject`, `$headers`. */
export interface TransformBindings {
  type: string | null;
  subject: string | null;
  headers: Record<string, string>;
}

export type TransformOutcome = { ok: true; body: Uint8Array; value: unknown } | { ok: false; error: string };

export interface EventTransform {
  readonly expression: string;
  /** `meter` counts the work; a route's expressions share one per event (a fresh one when none is given). */
  run(body: unknown, bindings: TransformBindings, meter?: StepMeter): Promise<TransformOutcome>;
}

interface JsonataError {
  code?: string;
  message?: string;
  position?: number;
}

function errorText(error: unknown): string {
  if (error instanceof StepBudgetExceeded) return error.message;
  const { message, position } = (error ?? {}) as JsonataError;
  const text = typeof message === "string" ? message : String(error);
  return position === undefined ? text : `${text} (at character ${position})`;
}

/** Regex literals in the expression meet the same bounds as a filter's $regex (src/routing/regex.ts). */
function regexLiteralProblems(node: unknown, problems: string[], seen = new Set<unknown>()): void {
  if (node === null || typeof node !== "object" || seen.has(node)) return;
  seen.add(node);
  const { type, value } = node as { type?: unknown; value?: unknown };
  if (type === "regex" && value instanceof RegExp) {
    const problem = regexProblem(value.source, value.flags.replace(/[gu]/g, ""));
    if (problem) problems.push(problem);
  }
  for (const child of Object.values(node)) regexLiteralProblems(child, problems, seen);
}

const encoder = new TextEncoder();

/**
 * Whether `value` written as JSON is surely longer than `limit` characters, read without writing it: a result may
 * hold the same large value many times over (`[1..20000].($$)`, each item the whole body), which JSON.stringify
 * would write out in full before its length could be checked. Counts a lower bound of the text's length, and
 * stops as soon as it passes `limit`, so the count itself costs at most `limit` steps.
 */
function surelyLongerAsJson(value: unknown, limit: number): boolean {
  let length = 0;
  const pending: unknown[] = [value];
  while (pending.length > 0 && length <= limit) {
    const next = pending.pop();
    if (typeof next === "string") length += next.length + 2;
    else if (Array.isArray(next)) {
      length += next.length + 1;
      for (const item of next) pending.push(item);
    } else if (next !== null && typeof next === "object") {
      for (const [key, item] of Object.entries(next)) {
        length += key.length + 4;
        pending.push(item);
      }
      length += 2;
    } else length += 1;
  }
  return length > limit;
}

export function compileTransform(
  value: unknown,
): { ok: true; transform: EventTransform } | { ok: false; problem: string } {
  if (typeof value !== "string" || value.trim() === "")
    return { ok: false, problem: "transform must be a JSONata expression (a string)" };
  if (value.length > MAX_EXPRESSION_CHARS)
    return { ok: false, problem: `transform is longer than ${MAX_EXPRESSION_CHARS} characters` };
  let compiled: jsonata.Expression;
  try {
    compiled = jsonata(value, {
      stack: TRANSFORM_MAX_DEPTH,
      sequence: TRANSFORM_MAX_SEQUENCE,
      RegexEngine: BoundedRegExp as unknown as RegExpConstructor,
    });
  } catch (error) {
    return { ok: false, problem: `transform is not a valid JSONata expression: ${errorText(error)}` };
  }
  const problems: string[] = [];
  regexLiteralProblems(compiled.ast(), problems);
  if (problems.length > 0) return { ok: false, problem: `transform: ${problems.join("; ")}` };
  const expression = value;
  return {
    ok: true,
    transform: {
      expression,
      async run(body, bindings, meter = new StepMeter(MAX_ROUTE_STEPS)) {
        let result: unknown;
        try {
          result = await evaluateCounted(
            compiled,
            body,
            { type: bindings.type, subject: bindings.subject, headers: bindings.headers },
            meter,
          );
        } catch (error) {
          return { ok: false, error: `transform failed: ${errorText(error)}` };
        }
        if (result === undefined)
          return { ok: false, error: "transform failed: the expression produced nothing for this event" };
        if (surelyLongerAsJson(result, MAX_TRANSFORM_OUTPUT_BYTES))
          return {
            ok: false,
            error: `transform failed: the result is over the ${MAX_TRANSFORM_OUTPUT_BYTES}-byte limit`,
          };
        let text: string | undefined;
        try {
          text = JSON.stringify(result);
        } catch (error) {
          return { ok: false, error: `transform failed: the result is not JSON (${errorText(error)})` };
        }
        // A function is the only result JSON.stringify drops entirely.
        if (text === undefined) return { ok: false, error: "transform failed: the result is a function, not JSON" };
        const bytes = encoder.encode(text);
        if (bytes.byteLength > MAX_TRANSFORM_OUTPUT_BYTES) {
          return {
            ok: false,
            error: `transform failed: the result is ${bytes.byteLength} bytes, over the ${MAX_TRANSFORM_OUTPUT_BYTES}-byte limit`,
          };
        }
        // The value as sent (a sequence or a JSONata-internal wrapper becomes plain JSON).
        return { ok: true, body: bytes, value: JSON.parse(text) as unknown };
      },
    },
  };
}

/**
 * A forward route's extra headers: each a JSONata expression over the same input as the transform, whose result
 * (a string, or a number) is the header's value; a result of nothing leaves the header out for that event.
 */
export interface EventHeaders {
  run(
    body: unknown,
    bindings: TransformBindings,
    meter?: StepMeter,
  ): Promise<{ ok: true; headers: Record<string, string> } | { ok: false; error: string }>;
}

const HEADER_NAME = /^[a-z0-9][a-z0-9-]{0,63}$/;
/** What the forward sets itself (signature, identity, idempotency), and what credentials in plain config would leak. */
const RESERVED_HEADER =
  /^(content-type|content-length|host|idempotency-key|webhook-.*|x-webhook-.*|authorization|proxy-authorization|cookie)$/;
const MAX_HEADER_VALUE_CHARS = 1024;
const PLAIN_HEADER_VALUE = /^[\x20-\x7e]*$/;

export function compileHeaders(value: unknown): { ok: true; headers: EventHeaders } | { ok: false; problem: string } {
  if (!value || typeof value !== "object" || Array.isArray(value))
    return { ok: false, problem: "headers must be a table of header name = JSONata expression" };
  const expressions: [string, EventTransform][] = [];
  const problems: string[] = [];
  for (const [rawName, expression] of Object.entries(value)) {
    const name = rawName.toLowerCase();
    if (!HEADER_NAME.test(name)) problems.push(`header name ${JSON.stringify(rawName)} is not a plain header name`);
    else if (RESERVED_HEADER.test(name))
      problems.push(`header ${name} is set by the forward itself or would carry a credential in plain config`);
    const compiled = compileTransform(expression);
    if (compiled.ok) expressions.push([name, compiled.transform]);
    else problems.push(`header ${name}: ${compiled.problem}`);
  }
  if (problems.length > 0) return { ok: false, problem: `headers: ${problems.join("; ")}` };
  return {
    ok: true,
    headers: {
      async run(body, bindings, meter = new StepMeter(MAX_ROUTE_STEPS)) {
        const headers: Record<string, string> = {};
        for (const [name, transform] of expressions) {
          const result = await transform.run(body, bindings, meter);
          // Nothing for this event: the header is left out (an expression may add a header only sometimes).
          if (!result.ok && result.error.endsWith("produced nothing for this event")) continue;
          if (!result.ok) return { ok: false, error: `${result.error} (header ${name})` };
          const text =
            typeof result.value === "string"
              ? result.value
              : typeof result.value === "number"
                ? String(result.value)
                : null;
          if (text === null || text.length > MAX_HEADER_VALUE_CHARS || !PLAIN_HEADER_VALUE.test(text)) {
            return {
              ok: false,
              error: `transform failed: header ${name} must be printable ASCII text up to ${MAX_HEADER_VALUE_CHARS} characters`,
            };
          }
          headers[name] = text;
        }
        return { ok: true, headers };
      },
    },
  };
}
