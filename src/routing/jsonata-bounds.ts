import jsonata from "jsonata/jsonata.min.js";
import { MAX_REGEX_SUBJECT_CHARS, regexProblem, regexStepCost } from "./regex";
import type { StepMeter } from "./steps";

/**
 * JSONata's work on a body, counted in steps (src/routing/steps.ts) through the hooks the library offers: every
 * evaluation of a node enters `jsonata.__evaluate_entry` (one step) and leaves through `jsonata.__evaluate_exit`
 * (one step per item of a sequence it built, and the whole size of an operand that `=`, `!=`, `in` or `&` reads
 * in depth); every built-in is wrapped to pay for its input before it reads it, the quadratic `$distinct` and the
 * `n log n` `$sort` at their real rate. Regex literals run on an engine that
 * refuses a value longer than MAX_REGEX_SUBJECT_CHARS, and an unsafe pattern (one `$eval` built at run time).
 */

/** The binding the meter travels in: a name with a space in it, which no expression can spell. */
const METER_BINDING = " steps";
const EVALUATE_ENTRY = Symbol.for("jsonata.__evaluate_entry");
const EVALUATE_EXIT = Symbol.for("jsonata.__evaluate_exit");
/** Characters of a string read per step: copying or scanning text is far cheaper per unit than evaluating a node. */
const CHARS_PER_STEP = 64;

interface Frame {
  /** The evaluation's root frame: its bindings, and the regex engine its literals are built with. */
  base: { lookup(name: string): unknown; RegexEngine: unknown };
}

interface BuiltIn {
  _jsonata_function: true;
  implementation: (this: { environment: Frame }, ...args: unknown[]) => unknown;
  signature: unknown;
}

export class RegexSubjectTooLong extends Error {}

/** What JSONata builds each regex literal with (its `RegexEngine` option; per evaluation, meteredRegExp's). */
export class BoundedRegExp extends RegExp {
  protected readonly stepCost: (length: number) => number;

  constructor(pattern: RegExp | string, flags?: string) {
    super(pattern, flags);
    const kept = this.flags.replace(/[gu]/g, "");
    // A literal was checked when config loaded; one built at run time (by $eval) meets the same rule here.
    const problem = regexProblem(this.source, kept);
    if (problem) throw new Error(problem);
    this.stepCost = regexStepCost(this.source, kept);
  }

  override exec(subject: string): RegExpExecArray | null {
    if (subject.length > MAX_REGEX_SUBJECT_CHARS) {
      throw new RegexSubjectTooLong(
        `a regular expression was given a value of ${subject.length} characters, over the ${MAX_REGEX_SUBJECT_CHARS} it reads`,
      );
    }
    return super.exec(subject);
  }
}

/** The engine of one evaluation: each run pays its backtracking bound at the value's length. */
function meteredRegExp(meter: StepMeter): typeof BoundedRegExp {
  return class MeteredRegExp extends BoundedRegExp {
    override exec(subject: string): RegExpExecArray | null {
      meter.charge(this.stepCost(subject.length));
      return super.exec(subject);
    }
  };
}

function meterOf(frame: Frame): StepMeter {
  return frame.base.lookup(METER_BINDING) as StepMeter;
}

/** A value's size as a built-in reads it once: items, keys, or characters. */
function shallowSize(value: unknown): number {
  if (Array.isArray(value)) return value.length;
  if (typeof value === "string") return Math.ceil(value.length / CHARS_PER_STEP);
  if (value !== null && typeof value === "object") return Object.keys(value).length;
  return 0;
}

/** Every node (and every CHARS_PER_STEP characters) of a value, counted up to `cap` at most. */
function deepSize(value: unknown, cap: number): number {
  let size = 0;
  const pending: unknown[] = [value];
  while (pending.length > 0 && size <= cap) {
    const next = pending.pop();
    size += 1 + (typeof next === "string" ? Math.floor(next.length / CHARS_PER_STEP) : 0);
    if (Array.isArray(next)) for (const item of next) pending.push(item);
    else if (next !== null && typeof next === "object") for (const item of Object.values(next)) pending.push(item);
  }
  return size;
}

/** The keys of a value's objects, one level down: what `$keys`, `$lookup`, `$merge` and the like read. */
function keysRead(value: unknown): number {
  if (!Array.isArray(value)) return 0;
  let keys = 0;
  for (const item of value) if (item !== null && typeof item === "object") keys += Object.keys(item).length;
  return keys;
}

/** What a built-in costs beyond reading each argument once, for the ones that read more. */
const EXTRA_COST: Record<string, (args: unknown[], meter: StepMeter) => number> = {
  // Compares each item with every distinct item kept so far, each comparison as deep as the items.
  distinct: ([items], meter) =>
    Array.isArray(items) ? Math.ceil((items.length * deepSize(items, meter.limit)) / 2) : 0,
  sort: ([items]) => (Array.isArray(items) ? items.length * Math.ceil(Math.log2(items.length + 1)) : 0),
  pad: ([, width]) => (typeof width === "number" ? Math.ceil(Math.abs(width) / CHARS_PER_STEP) : 0),
  string: ([value], meter) => deepSize(value, meter.limit),
  clone: ([value], meter) => deepSize(value, meter.limit),
  join: ([strings], meter) => deepSize(strings, meter.limit),
  keys: ([value]) => keysRead(value),
  lookup: ([value]) => keysRead(value),
  merge: ([value]) => keysRead(value),
  spread: ([value]) => keysRead(value),
};

/**
 * Operators that read their operands whole: `=`, `!=` and `in` compare in depth, `&` writes a non-string operand
 * out as JSON. Each operand is marked when its operator is entered, and pays for its size when it is evaluated.
 */
const DEEP_OPERATORS = new Set(["=", "!=", "in", "&"]);
const deepOperands = new WeakSet<object>();

interface Node {
  type?: string;
  value?: unknown;
  lhs?: object;
  rhs?: object;
}

/** The evaluations whose regex engine is already the metered one. */
const meteredEvaluations = new WeakSet<object>();

function enter(node: Node, frame: Frame): void {
  const meter = meterOf(frame);
  meter.charge(1);
  if (!meteredEvaluations.has(frame.base)) {
    meteredEvaluations.add(frame.base);
    frame.base.RegexEngine = meteredRegExp(meter);
  }
  if (node.type === "binary" && DEEP_OPERATORS.has(node.value as string) && node.lhs && node.rhs) {
    deepOperands.add(node.lhs);
    deepOperands.add(node.rhs);
  }
}

function leave(node: Node, frame: Frame, result: unknown): void {
  if (result === null || typeof result !== "object") return;
  const meter = meterOf(frame);
  if (Array.isArray(result)) meter.charge(result.length);
  if (deepOperands.has(node)) meter.charge(deepSize(result, meter.limit));
}

/** Every function JSONata binds at its root (jsonata.js, `staticFrame.bind`). */
const BUILT_IN_NAMES = (
  "sum count max min average string substring substringBefore substringAfter lowercase uppercase length trim pad " +
  "match contains replace split join formatNumber formatBase formatInteger parseInteger number floor ceil round " +
  "abs sqrt power random boolean not map zip filter single reduce sift keys lookup append exists spread merge " +
  "reverse each error assert type sort shuffle distinct base64encode base64decode encodeUrlComponent encodeUrl " +
  "decodeUrlComponent decodeUrl eval toMillis fromMillis clone"
).split(" ");

let meteredBuiltIns: Promise<[string, BuiltIn][]> | null = null;

/** The built-ins, each paying for its input first. JSONata hands them out only by evaluating: once per isolate. */
function builtIns(): Promise<[string, BuiltIn][]> {
  meteredBuiltIns ??= (async () => {
    const listing = `{${BUILT_IN_NAMES.map((name) => `"${name}": $${name}`).join(", ")}}`;
    const originals = (await jsonata(listing).evaluate(null)) as Record<string, BuiltIn>;
    return BUILT_IN_NAMES.map((name): [string, BuiltIn] => {
      const original = originals[name]!;
      const extra = EXTRA_COST[name];
      const implementation = function (this: { environment: Frame }, ...args: unknown[]) {
        const meter = meterOf(this.environment);
        let cost = 1;
        for (const arg of args) cost += shallowSize(arg);
        if (extra) cost += extra(args, meter);
        meter.charge(cost);
        return original.implementation.apply(this, args);
      };
      // JSONata reads a function's arity from its length to decide what a $map or $filter passes it.
      Object.defineProperty(implementation, "length", { value: original.implementation.length });
      return [name, { ...original, implementation }];
    });
  })();
  return meteredBuiltIns;
}

const bounded = new WeakSet<jsonata.Expression>();

/** Installs the counting hooks and the metered built-ins on a compiled expression, once. */
async function bound(compiled: jsonata.Expression): Promise<void> {
  if (bounded.has(compiled)) return;
  const assign = compiled.assign as (name: string | symbol, value: unknown) => void;
  assign(EVALUATE_ENTRY, (node: Node, _input: unknown, frame: Frame) => enter(node, frame));
  assign(EVALUATE_EXIT, (node: Node, _input: unknown, frame: Frame, result: unknown) => leave(node, frame, result));
  for (const [name, builtIn] of await builtIns()) compiled.assign(name, builtIn);
  bounded.add(compiled);
}

/** Evaluates `compiled` over `input`, every step charged to `meter` (which throws StepBudgetExceeded past its limit). */
export async function evaluateCounted(
  compiled: jsonata.Expression,
  input: unknown,
  bindings: Record<string, unknown>,
  meter: StepMeter,
): Promise<unknown> {
  await bound(compiled);
  return compiled.evaluate(input, { ...bindings, [METER_BINDING]: meter });
}
