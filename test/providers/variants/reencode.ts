import fc from "fast-check";
import { withHeader } from "../support/contract";
import { type Delivery, onFirst, type Variant } from "./property";

/**
 * The building blocks of variants: changes to what a signature may leave out. Each keeps the meaning a parser reads
 * (the same JSON value, the same form parameters) or touches only a part the scheme does not sign.
 */

const headerValue = fc.stringMatching(/^[A-Za-z0-9_-]{1,36}$/);

function setHeader(delivery: Delivery, name: string, value: string | null): Delivery {
  return withHeader(delivery, name, value) as Delivery;
}

/** Each named header dropped, or set to another value; plus a user agent and a stray header of the sender's own. */
export function unsignedHeaders(names: readonly string[]): fc.Arbitrary<Variant> {
  const all = [...new Set([...names, "user-agent", "x-forwarded-for"])];
  return fc.oneof(
    fc.constantFrom(...all).map((name) => onFirst(`drop ${name}`, (delivery) => setHeader(delivery, name, null))),
    fc
      .tuple(fc.constantFrom(...all), headerValue)
      .map(([name, value]) => onFirst(`${name}: ${value}`, (delivery) => setHeader(delivery, name, value))),
  );
}

/** The same URL with a query the receiver ignores (for schemes that do not sign the URL called). */
export const queryAdded = headerValue.map((value) =>
  onFirst(`?retry=${value}`, (delivery) => ({
    ...delivery,
    url: `${delivery.url ?? ""}${delivery.url?.includes("?") ? "&" : "?"}retry=${value}`,
  })),
);

/**
 * The boundary between two signed parts moved: for a scheme that signs URL ‖ body with nothing between them, the
 * URL's last character (of a query the route ignores) moved to the front of the body signs the same bytes.
 */
export const urlTailIntoBody = fc.constant(
  onFirst("the URL's last character moved into the body", (delivery) => ({
    ...delivery,
    url: delivery.url!.slice(0, -1),
    body: delivery.url!.slice(-1) + delivery.body,
  })),
);

/** A deterministic shuffle driven by fast-check's seed, so a failing run replays. */
export function shuffled<T>(items: readonly T[], seed: number): T[] {
  const result = [...items];
  let state = seed >>> 0 || 1;
  for (let index = result.length - 1; index > 0; index--) {
    state = (Math.imul(state, 1_103_515_245) + 12_345) >>> 0;
    const other = state % (index + 1);
    [result[index], result[other]] = [result[other]!, result[index]!];
  }
  return result;
}

function deepShuffle(value: unknown, seed: number): unknown {
  if (Array.isArray(value)) return value.map((item, index) => deepShuffle(item, seed + index));
  if (value === null || typeof value !== "object") return value;
  const entries = shuffled(Object.entries(value), seed);
  return Object.fromEntries(entries.map(([name, item], index) => [name, deepShuffle(item, seed + 7 * index)]));
}

/** JSON text for `value` with every lower-case `e` inside strings written as `\u0065`: other bytes, the same value. */
function escapedJson(value: unknown): string {
  return JSON.stringify(value).replace(/"(?:[^"\\]|\\.)*"/g, (text) => text.replace(/e/g, "\\u0065"));
}

function withBody(delivery: Delivery, change: (parsed: unknown) => string): Delivery {
  return { ...delivery, body: change(JSON.parse(delivery.body)) };
}

/** The same JSON value indented: only whitespace between tokens differs. */
export const jsonIndented: fc.Arbitrary<Variant> = fc
  .constantFrom<string | number>(1, 2, 4, "\t")
  .map((indent) =>
    onFirst(`indented ${JSON.stringify(indent)}`, (delivery) =>
      withBody(delivery, (parsed) => JSON.stringify(parsed, null, indent)),
    ),
  );

/** The same JSON value with the strings' letters escaped. */
export const jsonEscaped: fc.Arbitrary<Variant> = fc.constant(
  onFirst("strings escaped", (delivery) => withBody(delivery, escapedJson)),
);

/** The same JSON value with every object's keys in another order. */
export const jsonKeysReordered: fc.Arbitrary<Variant> = fc
  .integer({ min: 1, max: 2 ** 31 })
  .map((seed) =>
    onFirst(`keys reordered (${seed})`, (delivery) =>
      withBody(delivery, (parsed) => JSON.stringify(deepShuffle(parsed, seed))),
    ),
  );

/** The same JSON value in other bytes: indented, its keys reordered, its strings escaped. */
export const jsonReencoded: fc.Arbitrary<Variant> = fc.oneof(jsonIndented, jsonKeysReordered, jsonEscaped);

/** Sets a dotted path (creating objects on the way) in a JSON body. */
export function setAt(document: unknown, path: string, value: unknown): unknown {
  const [head, ...rest] = path.split(".");
  const target =
    document !== null && typeof document === "object" ? structuredClone(document as Record<string, unknown>) : {};
  (target as Record<string, unknown>)[head!] = rest.length === 0 ? value : setAt(target[head!], rest.join("."), value);
  return target;
}

/** The named JSON fields (which the signature does not cover) set to other values. */
export function jsonFieldsChanged(paths: readonly string[]): fc.Arbitrary<Variant> {
  return fc
    .tuple(fc.constantFrom(...paths), headerValue)
    .map(([path, value]) =>
      onFirst(`${path} = ${value}`, (delivery) =>
        withBody(delivery, (parsed) => JSON.stringify(setAt(parsed, path, value))),
      ),
    );
}

function formPairs(body: string): string[] {
  return body.split("&");
}

/** One `name=value` pair spelled another way: `+` or `%20` for a space, letters percent-encoded, hex in lower case. */
function respelled(pair: string, style: number): string {
  return pair
    .split("=")
    .map((part) => {
      const text = decodeURIComponent(part.replace(/\+/g, " "));
      let encoded = [...text]
        .map((character) =>
          style % 3 === 0 && /[A-Za-z]/.test(character)
            ? `%${character.charCodeAt(0).toString(16).toUpperCase()}`
            : encodeURIComponent(character),
        )
        .join("");
      if (style % 2 === 0) encoded = encoded.replace(/%20/g, "+");
      if (style % 5 === 0) encoded = encoded.replace(/%[0-9A-F]{2}/g, (percent) => percent.toLowerCase());
      return encoded;
    })
    .join("=");
}

/**
 * For a scheme that signs each parameter as name‖value with nothing between them (Twilio): the first character of
 * one value moved to the end of its name signs the same bytes, as long as the names still sort the same.
 */
export const formBoundaryMoved: fc.Arbitrary<Variant> = fc.constantFrom("Body", "To").map((name) =>
  onFirst(`${name}'s first value character moved into its name`, (delivery) => ({
    ...delivery,
    body: formPairs(delivery.body)
      .map((pair) => {
        const [pairName, value = ""] = pair.split("=");
        if (pairName !== name || value.length < 2) return pair;
        const first = value.startsWith("%") ? value.slice(0, 3) : value.slice(0, 1);
        return `${pairName}${first}=${value.slice(first.length)}`;
      })
      .join("&"),
  })),
);

/** The same form parameters in other bytes: reordered, re-encoded, or one pair repeated. */
export const formReencoded: fc.Arbitrary<Variant> = fc.oneof(
  fc.integer({ min: 1, max: 2 ** 31 }).map((seed) =>
    onFirst(`params reordered (${seed})`, (delivery) => ({
      ...delivery,
      body: shuffled(formPairs(delivery.body), seed).join("&"),
    })),
  ),
  fc.integer({ min: 1, max: 29 }).map((style) =>
    onFirst(`params re-encoded (style ${style})`, (delivery) => ({
      ...delivery,
      body: formPairs(delivery.body)
        .map((pair) => respelled(pair, style))
        .join("&"),
    })),
  ),
  fc.nat().map((which) =>
    onFirst(`param ${which} repeated`, (delivery) => {
      const pairs = formPairs(delivery.body);
      const repeated = pairs[which % pairs.length]!;
      return { ...delivery, body: [...pairs, repeated].join("&") };
    }),
  ),
);
