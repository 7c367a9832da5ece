import { DATA_KEYWORDS, SCHEMA_MAPS } from "./schema-bounds";
import type { StepMeter } from "./steps";

/**
 * A schema's work on a body, counted in steps (src/routing/steps.ts): one step each time the validator applies one
 * schema node to one value of the body. Without a count, a recursive schema whose branches each descend (an
 * `anyOf` of two references to itself) applies 2^depth times to a nested body. @cfworker/json-schema reads every
 * keyword it knows from a node once per application, `__absolute_recursive_ref__` (its own note of a resolved
 * `$recursiveRef`) among them: a getter under that name, installed once the validator has indexed the document,
 * counts the applications. A node that has the note keeps it, uncounted: what it refers to counts.
 */

const READ_ONCE_PER_APPLICATION = "__absolute_recursive_ref__";

/** The meter of the check under way: validation is synchronous, so no other check can run meanwhile. */
let counting: StepMeter | null = null;

function countOn(node: object): void {
  if (Object.hasOwn(node, READ_ONCE_PER_APPLICATION)) return;
  Object.defineProperty(node, READ_ONCE_PER_APPLICATION, {
    enumerable: false,
    get() {
      counting?.charge(1);
      return undefined;
    },
  });
}

/** Installs the count on every schema node of `document` (after the validator has read it). */
export function countApplications(document: unknown): void {
  const pending: unknown[] = [document];
  while (pending.length > 0) {
    const node = pending.pop();
    if (Array.isArray(node)) {
      pending.push(...node);
      continue;
    }
    if (node === null || typeof node !== "object") continue;
    countOn(node);
    for (const [key, value] of Object.entries(node)) {
      if (DATA_KEYWORDS.has(key)) continue;
      if (SCHEMA_MAPS.has(key) && value !== null && typeof value === "object") pending.push(...Object.values(value));
      else pending.push(value);
    }
  }
}

/** Runs one validation with its applications charged to `meter` (which throws StepBudgetExceeded past its limit). */
export function countedCheck<T>(meter: StepMeter, check: () => T): T {
  counting = meter;
  try {
    return check();
  } finally {
    counting = null;
  }
}
