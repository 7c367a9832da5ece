import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { compileFilter, type FilterSubject } from "../../src/routing/filter";
import { regexProblem } from "../../src/routing/regex";
import { applyRoute, type RouteRules } from "../../src/routing/route";
import { compileSchema } from "../../src/routing/schema";
import { compileHeaders, compileTransform, MAX_TRANSFORM_OUTPUT_BYTES } from "../../src/routing/transform";

/**
 * Filters (sift), transforms (JSONata) and schemas (@cfworker/json-schema) as the Worker runs them: these tests
 * run inside workerd, which refuses code generation from strings, so each library passing here runs without eval.
 */

const event = (body: unknown, extra: Partial<FilterSubject> = {}): FilterSubject => ({
  body,
  headers: { "content-type": "application/json", "x-shop": "north" },
  type: "account.credited",
  subject: "acct_0042",
  ...extra,
});

function filter(query: unknown) {
  const compiled = compileFilter(query);
  if (!compiled.ok) throw new Error(compiled.problem);
  return compiled.filter;
}

function problemOf(query: unknown): string {
  const compiled = compileFilter(query);
  if (compiled.ok) throw new Error("expected the filter to be refused");
  return compiled.problem;
}

/**
 * The test runner itself needs eval (it loads modules that way), so here code generation is refused by hand for
 * the duration of each test: a library reaching for eval or new Function fails the test, as it would in production
 * workerd (which refuses both).
 */
const realFunction = globalThis.Function;
const realEval = globalThis.eval;
beforeEach(() => {
  const refuse = () => {
    throw new EvalError("Code generation from strings disallowed for this context");
  };
  globalThis.Function = new Proxy(realFunction, { construct: refuse, apply: refuse });
  globalThis.eval = refuse as typeof eval;
});
afterEach(() => {
  globalThis.Function = realFunction;
  globalThis.eval = realEval;
});

describe("the guard against code generation", () => {
  it("refuses eval and new Function while a test runs", () => {
    expect(() => new Function("return 1")).toThrow(/Code generation/);
    expect(() => globalThis.eval("1")).toThrow(/Code generation/);
  });
});

describe("route filters", () => {
  const credit = {
    type: "account.credited",
    data: { account: "acct_0042", amount: 250, tags: ["vip", "eu"], items: [{ sku: "a", qty: 2 }] },
  };

  it("match by type, equality and membership", () => {
    expect(filter({ type: "account.credited" })(event(credit))).toBe(true);
    expect(filter({ type: "account.debited" })(event(credit))).toBe(false);
    expect(filter({ type: { $in: ["account.debited", "account.credited"] } })(event(credit))).toBe(true);
    expect(filter({ type: { $nin: ["account.credited"] } })(event(credit))).toBe(false);
    expect(filter({ type: { $ne: "account.credited" } })(event(credit))).toBe(false);
    expect(filter({ subject: { $eq: "acct_0042" } })(event(credit))).toBe(true);
    expect(filter({ "headers.x-shop": "north" })(event(credit))).toBe(true);
  });

  it("compare numbers, test existence, and read dotted paths and arrays", () => {
    expect(filter({ "body.data.amount": { $gt: 100, $lte: 250 } })(event(credit))).toBe(true);
    expect(filter({ "body.data.amount": { $lt: 100 } })(event(credit))).toBe(false);
    expect(filter({ "body.data.amount": { $gte: 251 } })(event(credit))).toBe(false);
    expect(filter({ "body.data.refund": { $exists: false } })(event(credit))).toBe(true);
    expect(filter({ "body.data.refund": { $exists: true } })(event(credit))).toBe(false);
    // An array field matches when any element does; dotted paths reach into arrays of objects.
    expect(filter({ "body.data.tags": "vip" })(event(credit))).toBe(true);
    expect(filter({ "body.data.items.sku": "a" })(event(credit))).toBe(true);
    expect(filter({ "body.data.items": { $elemMatch: { sku: "a", qty: { $gte: 3 } } } })(event(credit))).toBe(false);
  });

  it("combine with $and, $or and $not, and test strings", () => {
    expect(filter({ $or: [{ type: "account.debited" }, { "body.data.amount": { $gt: 200 } }] })(event(credit))).toBe(
      true,
    );
    expect(filter({ $and: [{ type: "account.credited" }, { "body.data.amount": { $gt: 300 } }] })(event(credit))).toBe(
      false,
    );
    expect(filter({ type: { $not: { $startsWith: "account." } } })(event(credit))).toBe(false);
    expect(filter({ type: { $startsWith: "account." } })(event(credit))).toBe(true);
    expect(filter({ type: { $endsWith: ".credited" } })(event(credit))).toBe(true);
    expect(filter({ subject: { $contains: "0042" } })(event(credit))).toBe(true);
    expect(filter({ type: { $regex: "^ACCOUNT\\.", $options: "i" } })(event(credit))).toBe(true);
    expect(filter({ type: { $regex: "^order\\." } })(event(credit))).toBe(false);
  });

  it("accept the same query written as a JSON string", () => {
    expect(filter('{"type": {"$in": ["account.credited"]}}')(event(credit))).toBe(true);
  });

  it("refuse $where (code from config), unknown operators and keys that name no field of the event", () => {
    expect(problemOf({ type: { $where: "this.type == 'x'" } })).toMatch(/unsupported operator \$where/);
    expect(problemOf({ $where: "true" })).toMatch(/\$where cannot stand at the top/);
    expect(problemOf({ type: { $type: "string" } })).toMatch(/unsupported operator \$type/);
    expect(problemOf({ "data.type": "x" })).toMatch(/"data\.type" must start with body, headers, type or subject/);
    expect(problemOf({ $or: [{ typ: "x" }] })).toMatch(/"typ" must start with/);
    expect(problemOf("{not json")).toMatch(/not JSON/);
    expect(problemOf(["type"])).toMatch(/must be a table/);
  });

  it("refuse regular expressions that could backtrack without end, and bound what a $regex reads", () => {
    expect(problemOf({ type: { $regex: "^(a+)+$" } })).toMatch(/exponential time/);
    expect(problemOf({ type: { $regex: "(x*)*y" } })).toMatch(/exponential time/);
    expect(problemOf({ type: { $regex: "(a)\\1" } })).toMatch(/back-reference/);
    expect(problemOf({ type: { $regex: "a".repeat(201) } })).toMatch(/longer than 200/);
    expect(problemOf({ type: { $regex: "[" } })).toMatch(/not a valid regular expression/);
    expect(problemOf({ type: { $regex: "a", $options: "g" } })).toMatch(/may only be i, m and s/);
    expect(regexProblem("^account\\.(credited|debited)$")).toBeNull();
    // A value past the bound never reaches the engine (and so never matches).
    const long = "x".repeat(5000);
    expect(filter({ "body.text": { $regex: "^x+$" } })(event({ text: long }))).toBe(false);
    expect(filter({ "body.text": { $regex: "^x+$" } })(event({ text: "xxx" }))).toBe(true);
  });
});

describe("route transforms", () => {
  function transform(expression: string) {
    const compiled = compileTransform(expression);
    if (!compiled.ok) throw new Error(compiled.problem);
    return compiled.transform;
  }
  const bindings = { type: "account.credited", subject: "acct_0042", headers: { "x-shop": "north" } };

  it("shape the body with JSONata, reading $type, $subject and $headers", async () => {
    const result = await transform(
      '{ "text": $type & " for " & $subject & ": " & $string(data.amount) & " (" & $headers.`x-shop` & ")" }',
    ).run({ data: { amount: 7 } }, bindings);
    expect(result).toEqual({
      ok: true,
      body: new TextEncoder().encode('{"text":"account.credited for acct_0042: 7 (north)"}'),
      value: { text: "account.credited for acct_0042: 7 (north)" },
    });
  });

  it("fail as a typed error when the expression fails, produces nothing, runs too long or produces too much", async () => {
    expect(await transform("$number(data.name)").run({ data: { name: "abc" } }, bindings)).toMatchObject({
      ok: false,
      error: expect.stringMatching(/^transform failed: /),
    });
    expect(await transform("data.missing").run({ data: {} }, bindings)).toEqual({
      ok: false,
      error: "transform failed: the expression produced nothing for this event",
    });
    const endless = await transform("($loop := function($n) { $loop($n + 1) }; $loop(0))").run({}, bindings);
    expect(endless).toMatchObject({
      ok: false,
      error: expect.stringMatching(/^transform failed: .*(stack|steps|deep)/i),
    });
    const huge = await transform('$pad("x", 300000)').run({}, bindings);
    expect(huge).toEqual({
      ok: false,
      error: expect.stringMatching(
        new RegExp(`^transform failed: the result is (\\d+ bytes, )?over the ${MAX_TRANSFORM_OUTPUT_BYTES}-byte limit`),
      ),
    });
  });

  it("refuse an expression that does not parse, and unsafe regex literals, when config loads", () => {
    expect(compileTransform('{ "text": ')).toMatchObject({
      ok: false,
      problem: expect.stringMatching(/^transform is not a valid JSONata expression/),
    });
    expect(compileTransform("$match(text, /(a+)+$/)")).toMatchObject({
      ok: false,
      problem: expect.stringMatching(/exponential time/),
    });
    expect(compileTransform(42)).toMatchObject({ ok: false });
  });
});

describe("a forward route's headers", () => {
  const bindings = { type: "account.credited", subject: "acct_0042", headers: {} };

  it("compute each value per event, leaving out a header whose expression yields nothing", async () => {
    const compiled = compileHeaders({
      "X-Account": "data.account",
      "x-amount": "data.amount",
      "x-refund": "data.refund",
    });
    if (!compiled.ok) throw new Error(compiled.problem);
    expect(await compiled.headers.run({ data: { account: "acct_1", amount: 5 } }, bindings)).toEqual({
      ok: true,
      headers: { "x-account": "acct_1", "x-amount": "5" },
    });
    expect(await compiled.headers.run({ data: { account: { nested: true } } }, bindings)).toEqual({
      ok: false,
      error: expect.stringMatching(/^transform failed: header x-account must be printable ASCII text/),
    });
    expect(await compiled.headers.run({ data: { account: "line\nbreak" } }, bindings)).toMatchObject({ ok: false });
  });

  it("refuse names the forward sets itself, credentials in plain config, and expressions that do not parse", () => {
    expect(compileHeaders({ "webhook-signature": "'x'" })).toMatchObject({
      ok: false,
      problem: expect.stringMatching(/webhook-signature is set by the forward itself/),
    });
    expect(compileHeaders({ authorization: "'Bearer x'" })).toMatchObject({
      ok: false,
      problem: expect.stringMatching(/credential/),
    });
    expect(compileHeaders({ "x ok": "'x'" })).toMatchObject({
      ok: false,
      problem: expect.stringMatching(/not a plain header name/),
    });
    expect(compileHeaders({ "x-a": "(" })).toMatchObject({
      ok: false,
      problem: expect.stringMatching(/header x-a: transform is not a valid JSONata/),
    });
  });
});

describe("route schemas", () => {
  const schema = {
    type: "object",
    required: ["type", "data"],
    properties: {
      data: { type: "object", required: ["amount"], properties: { amount: { type: "integer", minimum: 1 } } },
    },
  };

  it("pass a matching body and name each failure of one that does not match", () => {
    const compiled = compileSchema(schema);
    if (!compiled.ok) throw new Error(compiled.problem);
    expect(compiled.schema.check({ type: "x", data: { amount: 3 } })).toEqual({ ok: true });
    const verdict = compiled.schema.check({ type: "x", data: { amount: "3" } });
    expect(verdict).toEqual({ ok: false, errors: [expect.stringMatching(/^#\/data\/amount: .*integer/)] });
    expect(compiled.schema.check({ data: {} })).toMatchObject({
      ok: false,
      errors: expect.arrayContaining([expect.stringMatching(/type/), expect.stringMatching(/amount/)]),
    });
  });

  it("refuse a schema that is not one, or holds an unsafe pattern, when config loads", () => {
    expect(compileSchema(["object"])).toMatchObject({ ok: false });
    expect(compileSchema({ type: "string", pattern: "^(a|a)*(b+)+$" })).toMatchObject({
      ok: false,
      problem: expect.stringMatching(/exponential time/),
    });
    expect(compileSchema('{"type": "object"}')).toMatchObject({ ok: true });
  });
});

describe("a route applied to a stored event", () => {
  const bytes = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));
  const rules = (parts: Partial<RouteRules>): RouteRules => ({
    name: "r",
    filter: null,
    schema: null,
    transform: null,
    headers: null,
    control: null,
    ordering: null,
    ...parts,
  });

  it("passes a plain route's bytes untouched, skips a filtered-out event, refuses a schema mismatch, and transforms", async () => {
    const stored = {
      body: bytes({ type: "account.credited", data: { amount: 5 } }),
      keptHeaders: '{"content-type":"application/json"}',
      eventType: "account.credited",
      subjectId: null,
    };
    expect(await applyRoute(rules({}), stored)).toEqual({ kind: "deliver", transformed: null, headers: null });
    const onlyDebits = compileFilter({ type: "account.debited" });
    const bigOnes = compileSchema({
      type: "object",
      properties: { data: { properties: { amount: { minimum: 100 } } } },
    });
    const shape = compileTransform('{"amount": data.amount}');
    if (!onlyDebits.ok || !bigOnes.ok || !shape.ok) throw new Error("fixture rules must compile");
    expect(await applyRoute(rules({ filter: onlyDebits.filter }), stored)).toEqual({
      kind: "skip",
      reason: "filtered out by route r",
    });
    expect(await applyRoute(rules({ schema: bigOnes.schema }), stored)).toEqual({
      kind: "refuse",
      error: expect.stringMatching(/^schema mismatch on route r: #\/data\/amount: .*100/),
    });
    expect(await applyRoute(rules({ transform: shape.transform }), stored)).toEqual({
      kind: "deliver",
      transformed: { body: bytes({ amount: 5 }), value: { amount: 5 } },
      headers: null,
    });
  });
});
