import safeRegex from "safe-regex2";

/**
 * Regular expressions from config (a filter's `$regex`, a schema's `pattern`) run against event bodies, and a
 * provider's payload carries text anyone can type (an issue title, a customer name). JavaScript's engine
 * backtracks with no time limit, so a pattern such as `(a+)+$` could stall a consumer on one crafted string.
 * Patterns are therefore refused when config loads unless they are short, of star height one (no quantified
 * group that itself holds a quantifier: the shape behind exponential backtracking) and hold at most one unbounded
 * repetition (`a.*a.*b` backtracks in n^3 on a run of a's: each unbounded repetition after the first multiplies
 * the cost by the value's length); and a regex only ever looks at a value up to MAX_REGEX_SUBJECT_CHARS long, so
 * the one repetition left costs at most the square of that.
 */

export const MAX_REGEX_PATTERN_CHARS = 200;
/** Few repetitions per pattern: each one multiplies what a polynomial backtrack can cost. */
const MAX_REGEX_REPETITIONS = 6;
export const MAX_REGEX_SUBJECT_CHARS = 4096;
const ALLOWED_FLAGS = /^[ims]*$/;
/** A repetition allowed more times than this (`{0,1000}`) backtracks like an unbounded one on a long value. */
const MAX_BOUNDED_REPETITION = 64;

interface RepetitionShape {
  /** Repetitions with no upper bound (`*`, `+`, `{n,}`) or one past MAX_BOUNDED_REPETITION. */
  unbounded: number;
  /** A repeated group holding alternatives (`(a|aa)*`): each repetition may take either, 2^n ways to fail. */
  repeatedAlternatives: boolean;
}

/** The repetition at `index`: none, one that may repeat at most once (`?`, `{0,1}`), bounded, or unbounded. */
function repetitionAt(pattern: string, index: number): "none" | "once" | "bounded" | "unbounded" {
  const char = pattern[index];
  if (char === "*" || char === "+") return "unbounded";
  if (char === "?") return "once";
  if (char !== "{") return "none";
  const bounds = /^\{(\d+)(,(\d*))?\}/.exec(pattern.slice(index));
  if (!bounds) return "none";
  const most = bounds[2] === undefined ? Number(bounds[1]) : bounds[3] === "" ? Infinity : Number(bounds[3]);
  if (most > MAX_BOUNDED_REPETITION) return bounds[2] === undefined ? "bounded" : "unbounded";
  return most <= 1 ? "once" : "bounded";
}

/** Reads the repetitions of a pattern that safe-regex2 lets through (it counts star height and repetitions only). */
export function repetitionShape(pattern: string): RepetitionShape {
  const shape: RepetitionShape = { unbounded: 0, repeatedAlternatives: false };
  // Per open group: whether it holds a `|`, at any depth.
  const groups: boolean[] = [false];
  let inClass = false;
  for (let index = 0; index < pattern.length; index++) {
    const char = pattern[index];
    if (char === "\\") {
      index++;
      continue;
    }
    if (inClass) {
      if (char === "]") inClass = false;
      continue;
    }
    if (char === "[") inClass = true;
    else if (char === "(") groups.push(false);
    else if (char === "|") groups[groups.length - 1] = true;
    else if (char === ")" && groups.length > 1) {
      const alternatives = groups.pop()!;
      groups[groups.length - 1] ||= alternatives;
      const after = repetitionAt(pattern, index + 1);
      if (alternatives && (after === "bounded" || after === "unbounded")) shape.repeatedAlternatives = true;
    } else if (repetitionAt(pattern, index) === "unbounded") shape.unbounded++;
  }
  return shape;
}

/** Why a pattern cannot be used, or null. */
export function regexProblem(pattern: unknown, flags: unknown = ""): string | null {
  if (typeof pattern !== "string") return `a regular expression must be a string (got ${JSON.stringify(pattern)})`;
  if (pattern.length > MAX_REGEX_PATTERN_CHARS)
    return `regular expression is longer than ${MAX_REGEX_PATTERN_CHARS} characters`;
  if (typeof flags !== "string" || !ALLOWED_FLAGS.test(flags))
    return `regular expression options may only be i, m and s (got ${JSON.stringify(flags)})`;
  try {
    new RegExp(pattern, flags);
  } catch (error) {
    return `${JSON.stringify(pattern)} is not a valid regular expression (${error instanceof Error ? error.message : String(error)})`;
  }
  // Back-references make matching exponential whatever the star height.
  if (/\\[1-9]|\\k</.test(pattern))
    return `regular expression ${JSON.stringify(pattern)} uses a back-reference, which can take exponential time`;
  if (!safeRegex(pattern, { limit: MAX_REGEX_REPETITIONS })) {
    return `regular expression ${JSON.stringify(pattern)} could take exponential time (a quantified group holding another quantifier, or more than ${MAX_REGEX_REPETITIONS} repetitions)`;
  }
  const shape = repetitionShape(pattern);
  if (shape.repeatedAlternatives)
    return `regular expression ${JSON.stringify(pattern)} repeats a group of alternatives, which can take exponential time`;
  if (shape.unbounded > 1) {
    return `regular expression ${JSON.stringify(pattern)} has ${shape.unbounded} unbounded repetitions (*, +, {n,} or more than {0,${MAX_BOUNDED_REPETITION}}), which can take polynomial time: keep one and bound the others, as in {1,${MAX_BOUNDED_REPETITION}}`;
  }
  return null;
}
