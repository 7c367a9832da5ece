import safeRegex from "safe-regex2";

/**
 * Regular expressions from config (a filter's `$regex`, a schema's `pattern`) run against event bodies, and a
 * provider's payload carries text anyone can type (an issue title, a customer name). JavaScript's engine
 * backtracks with no time limit, so a pattern such as `(a+)+$` could stall a consumer on one crafted string.
 * Patterns are therefore refused when config loads unless they are short and of star height one (no quantified
 * group that itself holds a quantifier: the shape behind exponential backtracking), and a $regex only ever
 * looks at a value up to MAX_REGEX_SUBJECT_CHARS long, which bounds what the polynomial cases can cost.
 */

export const MAX_REGEX_PATTERN_CHARS = 200;
/** Few repetitions per pattern: each one multiplies what a polynomial backtrack can cost. */
const MAX_REGEX_REPETITIONS = 6;
export const MAX_REGEX_SUBJECT_CHARS = 4096;
const ALLOWED_FLAGS = /^[ims]*$/;

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
  return null;
}
