import safeRegex from "safe-regex2";

/**
 * Regular expressions from config (a filter's `$regex`, a schema's `pattern`) run against event bodies, and a
 * provider's payload carries text anyone can type (an issue title, a customer name). JavaScript's engine
 * backtracks with no time limit, so a pattern such as `(a+)+$` could stall a consumer on one crafted string.
 * Patterns are therefore refused when config loads unless they are short, of star height one (no quantified
 * group that itself holds a quantifier: the shape behind exponential backtracking, nor a repeated group of
 * alternatives) and their repetitions cannot backtrack more than MAX_REGEX_BACKTRACKING times on a value of
 * MAX_REGEX_SUBJECT_CHARS characters (`a.*a.*b` backtracks in n^3 on a run of a's: each unbounded repetition, and
 * the free start of an unanchored pattern, multiplies the cost by the value's length, each bounded one by its
 * range); and a regex only ever looks at a value up to MAX_REGEX_SUBJECT_CHARS long.
 */

export const MAX_REGEX_PATTERN_CHARS = 200;
/** Few repetitions per pattern: each one multiplies what a polynomial backtrack can cost. */
const MAX_REGEX_REPETITIONS = 6;
export const MAX_REGEX_SUBJECT_CHARS = 4096;
const ALLOWED_FLAGS = /^[ims]*$/;
/** A repetition allowed more times than this (`{0,1000}`) backtracks like an unbounded one on a long value. */
const MAX_BOUNDED_REPETITION = 64;
/**
 * The backtracking a pattern may cost on one value (backtrackingBound): an unanchored pattern with one unbounded
 * repetition (`refund.*failed`), twice over for one `?` beside it (`https?://\S+`); not two unbounded repetitions
 * and a free start (`a.*a.*b`: n³), nor one with a wide bounded one beside it (`a*a{0,64}b`: 4 s on 4,096 a's).
 */
const MAX_REGEX_BACKTRACKING = 2 * MAX_REGEX_SUBJECT_CHARS ** 2;

interface RepetitionShape {
  /** Repetitions with no upper bound (`*`, `+`, `{n,}`) or one past MAX_BOUNDED_REPETITION. */
  unbounded: number;
  /** The product of the ways each bounded repetition (`?` 2, `{1,3}` 3, `{4}` 1) and each `a|b|c` (3) may match. */
  boundedChoices: number;
  /** Whether the pattern can only match from the value's start (a leading `^`, no `|` beside it, no `m` flag). */
  anchored: boolean;
  /** A repeated group holding alternatives (`(a|aa)*`): each repetition may take either, 2^n ways to fail. */
  repeatedAlternatives: boolean;
}

/** The repetition at `index`: how many ways it can match (Infinity: unbounded) and how many characters it takes. */
function repetitionAt(pattern: string, index: number): { choices: number; length: number } | null {
  const char = pattern[index];
  if (char === "*" || char === "+") return { choices: Infinity, length: 1 };
  if (char === "?") return { choices: 2, length: 1 };
  if (char !== "{") return null;
  const bounds = /^\{(\d+)(,(\d*))?\}/.exec(pattern.slice(index));
  if (!bounds) return null;
  const least = Number(bounds[1]);
  const most = bounds[2] === undefined ? least : bounds[3] === "" ? Infinity : Number(bounds[3]);
  return { choices: most > MAX_BOUNDED_REPETITION ? Infinity : most - least + 1, length: bounds[0].length };
}

/** Reads the repetitions of a pattern that safe-regex2 lets through (it counts star height and repetitions only). */
export function repetitionShape(pattern: string, flags = ""): RepetitionShape {
  const shape: RepetitionShape = { unbounded: 0, boundedChoices: 1, anchored: false, repeatedAlternatives: false };
  // Per open group (the pattern itself first): its `|`s, and whether it holds any at any depth.
  const groups = [{ bars: 0, holdsAlternatives: false }];
  let inClass = false;
  // A `?` right after `(` names the group's kind (`(?:`), right after a repetition makes it lazy (`*?`).
  let previous: "group-open" | "repetition" | "other" = "other";
  for (let index = 0; index < pattern.length; index++) {
    const char = pattern[index];
    const before = previous;
    previous = "other";
    if (char === "\\") {
      index++;
      continue;
    }
    if (inClass) {
      if (char === "]") inClass = false;
      continue;
    }
    const group = groups[groups.length - 1]!;
    if (char === "[") inClass = true;
    else if (char === "(") {
      groups.push({ bars: 0, holdsAlternatives: false });
      previous = "group-open";
    } else if (char === "|") {
      group.bars++;
      group.holdsAlternatives = true;
    } else if (char === ")" && groups.length > 1) {
      groups.pop();
      // Each alternative is a way to match, as each count of a bounded repetition is.
      shape.boundedChoices *= group.bars + 1;
      groups[groups.length - 1]!.holdsAlternatives ||= group.holdsAlternatives;
      if (group.holdsAlternatives && (repetitionAt(pattern, index + 1)?.choices ?? 1) > 2)
        shape.repeatedAlternatives = true;
    } else if (!(char === "?" && before !== "other")) {
      const repetition = repetitionAt(pattern, index);
      if (!repetition) continue;
      if (repetition.choices === Infinity) shape.unbounded++;
      else shape.boundedChoices *= repetition.choices;
      index += repetition.length - 1;
      previous = "repetition";
    }
  }
  shape.boundedChoices *= groups[0]!.bars + 1;
  shape.anchored = pattern.startsWith("^") && groups[0]!.bars === 0 && !flags.includes("m");
  return shape;
}

/**
 * About how many steps a backtracking engine may take on a value of MAX_REGEX_SUBJECT_CHARS characters: each
 * unbounded repetition (and each start position, unless anchored) may be tried at every position, each bounded
 * one in each of its ways. A bound, not a prediction: patterns whose parts cannot overlap run far faster.
 */
function backtrackingBound(shape: RepetitionShape): number {
  const positions = shape.unbounded + (shape.anchored ? 0 : 1);
  return MAX_REGEX_SUBJECT_CHARS ** positions * shape.boundedChoices;
}

/** Backtracking steps counted as one step of a route's budget (src/routing/steps.ts): about a microsecond's work. */
const BACKTRACKS_PER_STEP = 1024;

/**
 * What one run of an accepted pattern costs on a value of a given length, in steps: its backtracking bound at that
 * length. Charged per run, so a body holding hundreds of long values pays for each.
 */
export function regexStepCost(pattern: string, flags = ""): (length: number) => number {
  const shape = repetitionShape(pattern, flags);
  const positions = shape.unbounded + (shape.anchored ? 0 : 1);
  return (length) => Math.ceil((Math.max(length, 1) ** positions * shape.boundedChoices) / BACKTRACKS_PER_STEP);
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
  const shape = repetitionShape(pattern, flags);
  if (shape.repeatedAlternatives)
    return `regular expression ${JSON.stringify(pattern)} repeats a group of alternatives, which can take exponential time`;
  if (backtrackingBound(shape) > MAX_REGEX_BACKTRACKING) {
    const parts = [
      `${shape.unbounded} unbounded repetition${shape.unbounded === 1 ? "" : "s"} (*, +, {n,} or more than {0,${MAX_BOUNDED_REPETITION}})`,
      ...(shape.boundedChoices > 1 ? [`bounded ones that multiply the ways to match by ${shape.boundedChoices}`] : []),
      shape.anchored ? "a ^ anchor" : "no ^ anchor, so every position is a start",
    ];
    return `regular expression ${JSON.stringify(pattern)} can take polynomial time on a long value: it has ${parts.join(", ")}; keep one unbounded repetition, bound the others (as in {1,${MAX_BOUNDED_REPETITION}}) or anchor it with ^`;
  }
  return null;
}
