import { MAX_REGEX_SUBJECT_CHARS } from "./regex";

/**
 * The shape a body may have for a route's rules to read it. A route's filter, schema and transform each cost
 * about the body's size times what the config asks of it, save where a rule walks a part of the body once per
 * item of another (a predicate over a list, a nested `items`): bounding every list, string and nesting level
 * keeps those products bounded too, and keeps the libraries' recursion far from the stack's end, which would
 * otherwise throw a RangeError that the consumer takes for a passing failure and retries. Checked once, in one
 * pass that holds no recursion, before any rule runs; a body past a bound ends its delivery dead, with the bound.
 */

export const MAX_BODY_DEPTH = 64;
export const MAX_BODY_ITEMS = 10_000;
export const MAX_BODY_STRING_CHARS = 128 * 1024;
/** A key is matched by patternProperties: it takes the same bound as any regex subject. */
export const MAX_BODY_KEY_CHARS = MAX_REGEX_SUBJECT_CHARS;

/** A value still to look at, with where it sits (its path is spelled out only for a reason). */
interface Pending {
  value: unknown;
  depth: number;
  parent: Pending | null;
  key: string | number;
}

function pathOf(entry: Pending): string {
  const parts: string[] = [];
  for (let at: Pending | null = entry; at?.parent; at = at.parent) {
    const { key } = at;
    parts.push(
      typeof key === "number"
        ? `[${key}]`
        : /^[A-Za-z_$][\w$]*$/.test(key)
          ? `.${key}`
          : `[${JSON.stringify(key.slice(0, 40))}]`,
    );
  }
  return `body${parts.reverse().join("")}`;
}

/** Why `body` is past the bounds a route's rules read within, or null. */
export function bodyBoundProblem(body: unknown): string | null {
  const pending: Pending[] = [{ value: body, depth: 0, parent: null, key: "" }];
  while (pending.length > 0) {
    const entry = pending.pop()!;
    const { value, depth } = entry;
    if (typeof value === "string") {
      if (value.length > MAX_BODY_STRING_CHARS)
        return `${pathOf(entry)} is a string of ${value.length} characters, over the ${MAX_BODY_STRING_CHARS} a route's rules read`;
      continue;
    }
    if (value === null || typeof value !== "object") continue;
    if (depth >= MAX_BODY_DEPTH)
      return `${pathOf(entry)} is nested deeper than the ${MAX_BODY_DEPTH} levels a route's rules read`;
    if (Array.isArray(value)) {
      if (value.length > MAX_BODY_ITEMS)
        return `${pathOf(entry)} is a list of ${value.length} items, over the ${MAX_BODY_ITEMS} a route's rules read`;
      for (let index = 0; index < value.length; index++)
        pending.push({ value: value[index], depth: depth + 1, parent: entry, key: index });
      continue;
    }
    const keys = Object.keys(value);
    if (keys.length > MAX_BODY_ITEMS)
      return `${pathOf(entry)} is an object of ${keys.length} keys, over the ${MAX_BODY_ITEMS} a route's rules read`;
    for (const key of keys) {
      if (key.length > MAX_BODY_KEY_CHARS)
        return `${pathOf(entry)} has a key of ${key.length} characters, over the ${MAX_BODY_KEY_CHARS} a route's rules read`;
      pending.push({ value: (value as Record<string, unknown>)[key], depth: depth + 1, parent: entry, key });
    }
  }
  return null;
}
