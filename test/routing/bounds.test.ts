import { describe, expect, it } from "vitest";
import { MAX_BODY_DEPTH, MAX_BODY_ITEMS, MAX_BODY_STRING_CHARS } from "../../src/routing/body-bounds";
import { compileFilter } from "../../src/routing/filter";
import { MAX_REGEX_SUBJECT_CHARS, regexProblem } from "../../src/routing/regex";
import { applyRoute, type RouteRules } from "../../src/routing/route";
import { compileSchema, type EventSchema } from "../../src/routing/schema";
import { MAX_UNIQUE_ITEMS } from "../../src/routing/schema-bounds";
import { MAX_ROUTE_STEPS, StepMeter } from "../../src/routing/steps";
import { compileTransform, type EventTransform, MAX_TRANSFORM_OUTPUT_BYTES } from "../../src/routing/transform";
import { problemsOf } from "../support/source-tables";

/**
 * The bounds on a route's rules (docs/routing.md "Bounds on a route's work"): the worst shapes of each rule kind
 * on bodies a sender controls, judged by counted steps, by what is refused when config loads, or by the reason a
 * delivery ends dead. Never by a clock: a deployed Worker's clock does not move while it computes.
 */

const bindings = { type: "account.credited", subject: "acct_1", headers: {} };

function transform(expression: string): EventTransform {
  const compiled = compileTransform(expression);
  if (!compiled.ok) throw new Error(compiled.problem);
  return compiled.transform;
}

function schema(document: unknown): EventSchema {
  const compiled = compileSchema(document);
  if (!compiled.ok) throw new Error(compiled.problem);
  return compiled.schema;
}

const numbers = (count: number) => Array.from({ length: count }, (_, index) => index);
const OVER_STEPS = `transform failed: it took more than ${MAX_ROUTE_STEPS} steps on this event (the bound on a route's work per event)`;

describe("a transform's work, counted in steps", () => {
  it("counts every evaluation, every item built, and each built-in's input", async () => {
    const meter = new StepMeter(MAX_ROUTE_STEPS);
    const result = await transform("$sum(items)").run({ items: numbers(1000) }, bindings, meter);
    expect(result).toMatchObject({ ok: true, value: 499_500 });
    // The path builds 1,000 items and $sum reads them once more.
    expect(meter.steps).toBeGreaterThanOrEqual(2000);
    expect(meter.steps).toBeLessThan(10_000);
  });

  it("charges $distinct for the pairs it compares, and stops it past the budget before it runs", async () => {
    const small = new StepMeter(MAX_ROUTE_STEPS);
    expect(await transform("$distinct(items)").run({ items: numbers(200) }, bindings, small)).toMatchObject({
      ok: true,
    });
    expect(small.steps).toBeGreaterThanOrEqual((200 * 200) / 2);
    const large = new StepMeter(MAX_ROUTE_STEPS);
    expect(await transform("$distinct(items)").run({ items: numbers(8000) }, bindings, large)).toEqual({
      ok: false,
      error: OVER_STEPS,
    });
    expect(large.steps).toBeGreaterThan(MAX_ROUTE_STEPS);
  });

  it("stops a built-in called once per item on the whole body (quadratic), an endless loop, and a huge $pad", async () => {
    const items = numbers(5000).map((index) => ({ sku: `s${index}` }));
    expect(await transform("items.$string($$)").run({ items }, bindings)).toEqual({ ok: false, error: OVER_STEPS });
    // A tail call does not deepen JSONata's stack: only the step budget ends it.
    const endless = "($loop := function($n) { $loop($n + 1) }; $loop(0))";
    expect(await transform(endless).run({}, bindings)).toEqual({ ok: false, error: OVER_STEPS });
    // Paid for before the string is built: 10^9 characters would exhaust the isolate's memory.
    expect(await transform('$pad("x", 1000000000)').run({}, bindings)).toEqual({ ok: false, error: OVER_STEPS });
    const sorted = new StepMeter(MAX_ROUTE_STEPS);
    await transform("$sort(items, function($a, $b) { $a < $b })").run({ items: numbers(1000) }, bindings, sorted);
    expect(sorted.steps).toBeGreaterThan(1000 * Math.log2(1000));
  });

  it("charges what operators and key-reading built-ins read in depth, so a loop over them is bounded", async () => {
    const keyed = (count: number) => Object.fromEntries(numbers(count).map((index) => [`k${index}`, index]));
    const body = {
      big: keyed(2000),
      copy: keyed(2000),
      rows: numbers(100).map(() => keyed(100)),
      names: numbers(10).map(() => "n".repeat(6400)),
      items: numbers(2000),
    };
    const stepsOf = async (expression: string) => {
      const meter = new StepMeter(MAX_ROUTE_STEPS);
      expect(await transform(expression).run(body, bindings, meter)).toMatchObject({ ok: true });
      return meter.steps;
    };
    // Both objects compared key by key; written out as JSON; 100 rows of 100 keys; 10 strings of 100 steps each.
    expect(await stepsOf("big = copy")).toBeGreaterThanOrEqual(4000);
    expect(await stepsOf('$length(big & "")')).toBeGreaterThanOrEqual(2000);
    expect(await stepsOf("$count($keys(rows))")).toBeGreaterThanOrEqual(10_000);
    expect(await stepsOf('$length($join(names, ","))')).toBeGreaterThanOrEqual(1000);
    expect(await transform("items.($$.big = $$.copy)").run(body, bindings)).toEqual({ ok: false, error: OVER_STEPS });
  });

  it("refuses a result holding one large value many times before writing it out", async () => {
    const body = { text: "x".repeat(100_000) };
    expect(await transform("[1..20000].($$)").run(body, bindings)).toEqual({
      ok: false,
      error: `transform failed: the result is over the ${MAX_TRANSFORM_OUTPUT_BYTES}-byte limit`,
    });
  });

  it("ends deep recursion at the stack bound", async () => {
    const deep = "($down := function($n) { $n = 0 ? 0 : 1 + $down($n - 1) }; $down(100000))";
    expect(await transform(deep).run({}, bindings)).toMatchObject({
      ok: false,
      error: expect.stringMatching(/^transform failed: .*stack/i),
    });
  });

  it("shares one budget between a route's headers and its transform", async () => {
    const meter = new StepMeter(MAX_ROUTE_STEPS);
    await transform("$count(items)").run({ items: numbers(3000) }, bindings, meter);
    const afterFirst = meter.steps;
    expect(afterFirst).toBeGreaterThan(3000);
    await transform("$count(items)").run({ items: numbers(3000) }, bindings, meter);
    expect(meter.steps).toBe(afterFirst * 2);
  });
});

describe("regular expressions, bounded by their shape and their subject", () => {
  it("refuses patterns that backtrack polynomially (or worse) on a long value, which safe-regex2 lets through", () => {
    // Two unbounded repetitions and a free start: n³ on a run of a's (24 s on 512 characters).
    expect(regexProblem("a.*a.*a.*b")).toMatch(
      /can take polynomial time on a long value: it has 3 unbounded repetitions .*no \^ anchor/,
    );
    expect(regexProblem("[a-z]+@[a-z]+")).toMatch(/2 unbounded repetitions/);
    expect(regexProblem("x.{0,1000}y.*z")).toMatch(/2 unbounded repetitions/);
    // Bounded repetitions multiply: 4 s on 4,096 a's.
    expect(regexProblem("a*a{0,64}b")).toMatch(/1 unbounded repetition .*multiply the ways to match by 65/);
    expect(regexProblem("a{0,16}a{0,16}a{0,16}a{0,16}b")).toMatch(/multiply the ways to match by 83521/);
    expect(regexProblem("(a|aa)*b")).toMatch(/repeats a group of alternatives/);
    expect(regexProblem("^(?:ab|cd){2,8}$")).toMatch(/repeats a group of alternatives/);
    // One unbounded repetition with a free start, or two behind an anchor; bounded ones, escaped and bracketed
    // quantifier characters, group kinds and lazy repetitions: accepted.
    for (const accepted of [
      "^acct_[0-9a-z]+$",
      "^[a-z]+@[a-z]+$",
      "refund.*?failed",
      "https?://\\S+",
      "^\\d{1,3}\\.\\d{1,3}\\.\\d{1,3}\\.\\d{1,3}$",
      "^[*+]\\+\\*x+$",
      "^(?:https?|ftp)://\\S+$",
    ])
      expect(regexProblem(accepted)).toBeNull();
  });

  it("refuses such a pattern in a filter, a schema and a transform, reported as any route config problem", () => {
    const route = (rules: Record<string, unknown>) => ({
      routes: [{ name: "r", destination: "https://hooks.example.com/x", ...rules }],
    });
    expect(problemsOf(route({ filter: { "body.text": { $regex: "a.*a.*a.*b" } } }))).toEqual([
      expect.stringMatching(/^SOURCES\.example route r: filter: .*unbounded repetitions/),
    ]);
    expect(problemsOf(route({ schema: { properties: { text: { pattern: "a.*a.*a.*b" } } } }))).toEqual([
      expect.stringMatching(/^SOURCES\.example route r: schema: pattern: .*unbounded repetitions/),
    ]);
    expect(problemsOf(route({ schema: { patternProperties: { "(a|aa)*$": {} } } }))).toEqual([
      expect.stringMatching(/^SOURCES\.example route r: schema: patternProperties: .*alternatives/),
    ]);
    expect(problemsOf(route({ transform: "$match(text, /a.*a.*a.*b/)" }))).toEqual([
      expect.stringMatching(/^SOURCES\.example route r: transform: .*unbounded repetitions/),
    ]);
  });

  it("charges each run of a filter's or a transform's regex its backtracking bound at the value's length", async () => {
    const long = "x".repeat(MAX_REGEX_SUBJECT_CHARS);
    // Unanchored, one unbounded repetition: 4,096 starts times 4,096 positions, 1,024 backtracks a step.
    const perRun = (MAX_REGEX_SUBJECT_CHARS * MAX_REGEX_SUBJECT_CHARS) / 1024;
    const compiled = compileFilter({ "body.notes": { $regex: "refund.*failed" } });
    if (!compiled.ok) throw new Error(compiled.problem);
    const meter = new StepMeter(MAX_ROUTE_STEPS);
    expect(compiled.filter({ body: { notes: long }, headers: {}, type: null, subject: null }, meter)).toBe(false);
    expect(meter.steps).toBe(perRun);
    const shortRun = new StepMeter(MAX_ROUTE_STEPS);
    compiled.filter({ body: { notes: "refund has failed" }, headers: {}, type: null, subject: null }, shortRun);
    expect(shortRun.steps).toBe(1);
    const transformed = new StepMeter(MAX_ROUTE_STEPS);
    await transform("$contains(notes, /refund.*failed/)").run({ notes: long }, bindings, transformed);
    expect(transformed.steps).toBeGreaterThanOrEqual(perRun);

    // 200 such values: each run within the subject bound, all of them together past the budget.
    const many = JSON.stringify({ notes: numbers(200).map(() => long) });
    const route: RouteRules = {
      name: "r",
      filter: compiled.filter,
      schema: null,
      transform: null,
      headers: null,
      control: null,
      ordering: null,
    };
    const stored = { body: new TextEncoder().encode(many), keptHeaders: null, eventType: null, subjectId: null };
    expect(await applyRoute(route, stored)).toEqual({
      kind: "refuse",
      error: `filter stopped on route r: it took more than ${MAX_ROUTE_STEPS} steps on this event (the bound on a route's work per event)`,
    });
    expect(await transform("notes.$contains($, /refund.*failed/)").run(JSON.parse(many), bindings)).toEqual({
      ok: false,
      error: OVER_STEPS,
    });
  });

  it("never runs a transform's regex on a value past the subject bound, nor one built at run time that is unsafe", async () => {
    const long = "a".repeat(MAX_REGEX_SUBJECT_CHARS + 1);
    expect(await transform("$match(text, /a+b/)").run({ text: long }, bindings)).toEqual({
      ok: false,
      error: `transform failed: a regular expression was given a value of ${long.length} characters, over the ${MAX_REGEX_SUBJECT_CHARS} it reads (at character 7)`,
    });
    // Within the bound every regex built-in works as JSONata's own.
    expect(await transform("$contains(text, /a+b/)").run({ text: "aab" }, bindings)).toMatchObject({ value: true });
    expect(await transform("$split(text, /B/i)").run({ text: "aab" }, bindings)).toMatchObject({ value: ["aa", ""] });
    expect(await transform('$replace(text, /a+/, "x")').run({ text: "aab" }, bindings)).toMatchObject({ value: "xb" });
    expect(await transform("$match(text, /a/).index").run({ text: "aab" }, bindings)).toMatchObject({ value: [0, 1] });
    expect(await transform("$eval(expression)").run({ expression: "$match('aaa', /(a|aa)*$/)" }, bindings)).toEqual({
      ok: false,
      error: expect.stringMatching(/^transform failed: .*repeats a group of alternatives/),
    });
  });
});

describe("a schema's costly keywords", () => {
  it("refuses uniqueItems without a small maxItems beside it, at config load", () => {
    const route = (document: unknown) => ({
      routes: [{ name: "r", destination: "https://hooks.example.com/x", schema: document }],
    });
    expect(problemsOf(route({ type: "array", uniqueItems: true }))).toEqual([
      expect.stringMatching(
        new RegExp(
          `^SOURCES\\.example route r: schema: uniqueItems compares every pair .* maxItems of at most ${MAX_UNIQUE_ITEMS}`,
        ),
      ),
    ]);
    expect(problemsOf(route({ properties: { tags: { uniqueItems: true, maxItems: 5000 } } }))).toEqual([
      expect.stringMatching(/uniqueItems compares every pair/),
    ]);
    expect(problemsOf(route({ properties: { tags: { uniqueItems: true, maxItems: 20 } } }))).toEqual([]);
    // A property may be named after a keyword: it is not one.
    expect(problemsOf(route({ properties: { uniqueItems: true, pattern: { type: "string" } } }))).toEqual([]);
  });

  it("never compares the items of an array longer than the maxItems beside uniqueItems", () => {
    const tags = schema({ properties: { tags: { uniqueItems: true, maxItems: 50 } } });
    expect(tags.check({ tags: ["a", "b"] })).toEqual({ ok: true });
    expect(tags.check({ tags: ["a", "a"] })).toEqual({
      ok: false,
      errors: [expect.stringMatching(/^#\/tags: .*[Dd]uplicate/)],
    });
    // 6,000 equal items: only maxItems speaks; uniqueItems (18 million comparisons) never ran.
    expect(tags.check({ tags: Array.from({ length: 6000 }, () => "same") })).toEqual({
      ok: false,
      errors: [expect.stringMatching(/^#\/tags: .*(too many|maxItems|6000)/i)],
    });
  });

  it("counts each schema node applied to each value of the body, and stops a check past the budget", async () => {
    const integers = schema({ items: { type: "integer" } });
    const meter = new StepMeter(MAX_ROUTE_STEPS);
    expect(integers.check(numbers(1000), meter)).toEqual({ ok: true });
    expect(meter.steps).toBeGreaterThanOrEqual(1000);
    // Each level applies the schema twice to the level below: 2^20 applications on a body nested 20 deep.
    const twice = { allOf: [{ items: { $ref: "#/$defs/node" } }, { items: { $ref: "#/$defs/node" } }] };
    const doubling = compileSchema({ $defs: { node: twice }, $ref: "#/$defs/node" });
    if (!doubling.ok) throw new Error(doubling.problem);
    const nested = JSON.stringify(numbers(20).reduce<unknown>((inner) => [inner], 0));
    const route: RouteRules = {
      name: "r",
      filter: null,
      schema: doubling.schema,
      transform: null,
      headers: null,
      control: null,
      ordering: null,
    };
    const stored = { body: new TextEncoder().encode(nested), keptHeaders: null, eventType: null, subjectId: null };
    expect(await applyRoute(route, stored)).toEqual({
      kind: "refuse",
      error: `schema check stopped on route r: it took more than ${MAX_ROUTE_STEPS} steps on this event (the bound on a route's work per event)`,
    });
  });

  it("runs pattern and format only on strings within the regex subject bound", () => {
    const named = schema({ properties: { name: { type: "string", pattern: "^a+b$" }, mail: { format: "email" } } });
    expect(named.check({ name: "aab", mail: "x@example.com" })).toEqual({ ok: true });
    expect(named.check({ name: "aa" })).toEqual({ ok: false, errors: [expect.stringMatching(/^#\/name: .*pattern/)] });
    const long = "a".repeat(MAX_REGEX_SUBJECT_CHARS + 1);
    const reason = `a string over ${MAX_REGEX_SUBJECT_CHARS} characters, more than a pattern or format reads`;
    expect(named.check({ name: long, mail: `${long}@example.com` })).toEqual({
      ok: false,
      errors: [`#/name: ${reason}`, `#/mail: ${reason}`],
    });
    // Other keywords around a guarded pattern still read as before.
    expect(named.check({ name: 7 })).toEqual({ ok: false, errors: [expect.stringMatching(/^#\/name: .*type/)] });
  });
});

describe("the body's shape, checked before any rule runs", () => {
  const route: RouteRules = {
    name: "r",
    filter: (() => {
      const compiled = compileFilter({ type: "account.credited" });
      if (!compiled.ok) throw new Error(compiled.problem);
      return compiled.filter;
    })(),
    schema: null,
    transform: null,
    headers: null,
    control: null,
    ordering: null,
  };
  const stored = (text: string) => ({
    body: new TextEncoder().encode(text),
    keptHeaders: null,
    eventType: "account.credited",
    subjectId: null,
  });
  const refused = (reason: string) => ({ kind: "refuse", error: `body over the bounds of route r: ${reason}` });

  it("refuses a list, a string, an object or a nesting past its bound, naming where it is", async () => {
    const list = JSON.stringify({ data: { items: numbers(MAX_BODY_ITEMS + 1) } });
    expect(await applyRoute(route, stored(list))).toEqual(
      refused(
        `body.data.items is a list of ${MAX_BODY_ITEMS + 1} items, over the ${MAX_BODY_ITEMS} a route's rules read`,
      ),
    );
    const text = JSON.stringify({ notes: [{ "the text": "x".repeat(MAX_BODY_STRING_CHARS + 1) }] });
    expect(await applyRoute(route, stored(text))).toEqual(
      refused(
        `body.notes[0]["the text"] is a string of ${MAX_BODY_STRING_CHARS + 1} characters, over the ${MAX_BODY_STRING_CHARS} a route's rules read`,
      ),
    );
    const keys = JSON.stringify(Object.fromEntries(numbers(MAX_BODY_ITEMS + 1).map((index) => [`k${index}`, 1])));
    expect(await applyRoute(route, stored(keys))).toMatchObject(
      refused(`body is an object of ${MAX_BODY_ITEMS + 1} keys, over the ${MAX_BODY_ITEMS} a route's rules read`),
    );
    // 200,000 levels: read without recursion, refused at the first level past the bound.
    const depth = 200_000;
    const nested = await applyRoute(route, stored(`${"[".repeat(depth)}${"]".repeat(depth)}`));
    expect(nested).toEqual(
      refused(
        `body${"[0]".repeat(MAX_BODY_DEPTH)} is nested deeper than the ${MAX_BODY_DEPTH} levels a route's rules read`,
      ),
    );
  });

  it("passes a body within every bound to the rules, and leaves a route without rules untouched", async () => {
    const within = JSON.stringify({ items: numbers(MAX_BODY_ITEMS), text: "x".repeat(1000) });
    expect(await applyRoute(route, stored(within))).toEqual({ kind: "deliver", transformed: null, headers: null });
    const plain = { ...route, filter: null };
    const over = JSON.stringify({ items: numbers(MAX_BODY_ITEMS + 1) });
    expect(await applyRoute(plain, stored(over))).toEqual({ kind: "deliver", transformed: null, headers: null });
  });
});
