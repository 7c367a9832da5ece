import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { app } from "../../src/app";
import { orderingValue } from "../../src/routing/ordering";
import { retryPolicyOf } from "../../src/sources/config";
import { ADMIN } from "../admin/support";
import { base, parsed, problemsOf } from "../support/source-tables";

/** `[[vars.SOURCES.<name>.routes]]`: one or several routes per source, every option checked when config loads. */

describe("a source's routes", () => {
  it("a source's own destination is one route named default, with no rules", () => {
    const source = parsed({ destination: "handler:accounts" });
    expect(source.destination).toEqual({ kind: "handler", handlerName: "accounts" });
    expect(source.route).toEqual({
      name: "default",
      filter: null,
      schema: null,
      transform: null,
      headers: null,
      control: null,
      ordering: null,
    });
  });

  it("one listed route gives the source its destination, filter, schema and transform", () => {
    const source = parsed({
      routes: [
        {
          name: "slack",
          destination: "https://hooks.example.com/x",
          filter: { type: "a.b" },
          schema: { type: "object" },
          transform: '{"text": type}',
        },
      ],
    });
    expect(source.destination).toMatchObject({ kind: "forward", url: "https://hooks.example.com/x" });
    expect(source.route.name).toBe("slack");
    expect(source.route.filter).toBeTypeOf("function");
    expect(source.route.schema).not.toBeNull();
    expect(source.route.transform?.expression).toBe('{"text": type}');
  });

  it("takes several routes, in order, each checked on its own; a name used twice, or too many routes, is refused", () => {
    const source = parsed({
      routes: [
        { name: "a", destination: "handler:accounts" },
        { name: "b", destination: "https://hooks.example.com/x", filter: { type: "a.b" } },
        { name: "c", destination: "none" },
      ],
    });
    expect(source.routes.map(({ rules, destination }) => [rules.name, destination.kind])).toEqual([
      ["a", "handler"],
      ["b", "forward"],
      ["c", "none"],
    ]);
    expect(source.routes[1]!.rules.filter).toBeTypeOf("function");
    expect(source.route.name).toBe("a");
    expect(
      problemsOf({
        routes: [
          { name: "a", destination: "handler:accounts" },
          { name: "a", destination: "none" },
        ],
      }),
    ).toEqual([expect.stringMatching(/route name "a" is used twice/)]);
    expect(
      problemsOf({
        routes: [
          { name: "a", destination: "handler:accounts" },
          { name: "b", destination: "handler:nope" },
        ],
      }),
    ).toEqual(['SOURCES.example: no handler named "nope" is registered']);
    expect(
      problemsOf({
        routes: [
          { name: "a", destination: "handler:accounts" },
          { name: "b", destination: "handler:accounts", filter: { type: { $where: "1" } } },
        ],
      }),
    ).toEqual(["SOURCES.example route b: filter: unsupported operator $where"]);
    expect(problemsOf({ routes: [{ name: "a", destination: "handler:accounts" }, { destination: "none" }] })).toEqual([
      expect.stringMatching(/routes\[1\]: name must match/),
    ]);
    const many = Array.from({ length: 17 }, (_, index) => ({ name: `r${index}`, destination: "none" }));
    expect(problemsOf({ routes: many })).toEqual([
      expect.stringMatching(/routes lists 17 routes; a source takes at most 16/),
    ]);
  });

  it("reads a route's retry table key by key over the source's; a route without one retries on the source's", () => {
    const source = parsed({
      retry: { base_delay_seconds: 5, max_retries: 2, jitter: 0 },
      routes: [
        { name: "own", destination: "handler:accounts", retry: { max_retries: 7, max_age: "2h" } },
        { name: "plain", destination: "none" },
      ],
    });
    expect(source.routes.map(({ retry }) => retry)).toEqual([
      { baseDelaySeconds: 5, maxDelaySeconds: 86_400, maxRetries: 7, jitter: 0, maxAgeMs: 7_200_000 },
      source.retry,
    ]);
    expect(source.retry.maxRetries).toBe(2);
    expect(retryPolicyOf(source, "own").maxRetries).toBe(7);
    expect(retryPolicyOf(source, null).maxRetries).toBe(7);
    expect(retryPolicyOf(source, "plain")).toBe(source.retry);
    expect(retryPolicyOf(source, "gone")).toBe(source.retry);
  });

  it("refuses a bad route retry table with the route's name, as a source's own", () => {
    expect(
      problemsOf({
        routes: [
          { name: "a", destination: "handler:accounts" },
          { name: "b", destination: "none", retry: { max_retries: 2.5, max_age: "3 days" } },
        ],
      }),
    ).toEqual([
      "SOURCES.example route b: retry.max_retries must be a whole number, 0 or more (got 2.5)",
      'SOURCES.example route b: retry.max_age must be a duration like "90s", "15m", "1h" or "3d" (got "3 days")',
    ]);
    expect(problemsOf({ routes: [{ name: "a", destination: "none", retry: 3 }] })).toEqual([
      "SOURCES.example route a: retry must be a table",
    ]);
  });
});

describe("a route's ordering", () => {
  const route = (options: Record<string, unknown>) => ({
    routes: [{ name: "r", destination: "https://hooks.example.com/x", ...options }],
  });

  it("reads ordered_by (the subject, or a path into the body) and on_dead (block unless it says skip)", () => {
    expect(parsed(route({})).route.ordering).toBeNull();
    expect(parsed(route({ ordered_by: "subject" })).route.ordering).toEqual({
      by: { kind: "subject" },
      onDead: "block",
      text: "subject",
    });
    expect(parsed(route({ ordered_by: "body.data.account", on_dead: "skip" })).route.ordering).toEqual({
      by: { kind: "body", path: "data.account" },
      onDead: "skip",
      text: "body.data.account",
    });
    expect(parsed(route({ ordered_by: "subject", on_dead: "block" })).route.ordering?.onDead).toBe("block");
  });

  it("reads an event's value as text, and finds none without a subject or field, in an object, or in a body that is not JSON", () => {
    const bySubject = parsed(route({ ordered_by: "subject" })).route.ordering!;
    const byField = parsed(route({ ordered_by: "body.data.account" })).route.ordering!;
    const body = (value: unknown) => new TextEncoder().encode(JSON.stringify(value));
    expect(orderingValue(bySubject, { subjectId: "acct_1", body: null })).toBe("acct_1");
    expect(orderingValue(bySubject, { subjectId: null, body: body({ data: { account: "acct_1" } }) })).toBeNull();
    expect(orderingValue(byField, { subjectId: "x", body: body({ data: { account: "acct_1" } }) })).toBe("acct_1");
    expect(orderingValue(byField, { subjectId: null, body: body({ data: { account: 42 } }) })).toBe("42");
    expect(orderingValue(byField, { subjectId: null, body: body({ data: { account: { id: 1 } } }) })).toBeNull();
    expect(orderingValue(byField, { subjectId: null, body: body({ data: {} }) })).toBeNull();
    expect(orderingValue(byField, { subjectId: null, body: new TextEncoder().encode("account=acct_1") })).toBeNull();
  });

  it("refuses an unknown ordered_by or on_dead, on_dead alone, ordering beside a source's destination, and two ordered routes of one source ordering by different values, naming the route", () => {
    expect(problemsOf(route({ ordered_by: "account" }))).toEqual([
      expect.stringMatching(
        /^SOURCES\.example route r: ordered_by must be "subject" or a dotted path into the body .*\(got "account"\)$/,
      ),
    ]);
    expect(problemsOf(route({ ordered_by: "body." }))).toEqual([expect.stringMatching(/route r: ordered_by must be/)]);
    expect(problemsOf(route({ ordered_by: 7 }))).toEqual([expect.stringMatching(/route r: ordered_by must be/)]);
    expect(problemsOf(route({ ordered_by: "subject", on_dead: "ignore" }))).toEqual([
      'SOURCES.example route r: on_dead must be "block" or "skip" (got "ignore")',
    ]);
    expect(problemsOf(route({ on_dead: "skip" }))).toEqual([
      "SOURCES.example route r: on_dead applies to an ordered route only: give ordered_by too",
    ]);
    expect(problemsOf({ destination: "handler:accounts", ordered_by: "subject" })).toEqual([
      expect.stringMatching(/^SOURCES\.example: ordered_by belongs to a route/),
    ]);
    expect(
      problemsOf({
        routes: [
          { name: "a", destination: "handler:accounts", ordered_by: "subject" },
          { name: "b", destination: "https://hooks.example.com/x" },
          { name: "c", destination: "https://hooks.example.com/y", ordered_by: "body.data.account" },
        ],
      }),
    ).toEqual([
      `SOURCES.example route c: ordered_by "body.data.account" differs from route a's "subject": the ordered routes of one source order by one value`,
    ]);
  });

  it("takes ordered_by on any route of a source with several routes, each with its own on_dead", () => {
    const source = parsed({
      routes: [
        { name: "a", destination: "handler:accounts" },
        { name: "b", destination: "https://hooks.example.com/x", ordered_by: "subject", on_dead: "skip" },
        { name: "c", destination: "https://hooks.example.com/y", ordered_by: "subject" },
      ],
    });
    expect(
      source.routes.map(({ rules }) => [rules.name, rules.ordering?.text ?? null, rules.ordering?.onDead ?? null]),
    ).toEqual([
      ["a", null, null],
      ["b", "subject", "skip"],
      ["c", "subject", "block"],
    ]);
  });
});

describe("a route's delivery control", () => {
  const route = (options: Record<string, unknown>) => ({
    routes: [{ name: "r", destination: "https://hooks.example.com/x", ...options }],
  });

  it("reads rate_limit, max_in_flight, circuit_breaker and paused; a route without them has no control", () => {
    expect(parsed(route({})).route.control).toBeNull();
    expect(parsed(route({ rate_limit: "20/s" })).route.control).toEqual({
      rateLimit: { count: 20, windowMs: 1000, text: "20/s" },
      maxInFlight: null,
      breaker: null,
      paused: false,
      recover: false,
    });
    expect(parsed(route({ rate_limit: "600/min", max_in_flight: 4 })).route.control).toMatchObject({
      rateLimit: { count: 600, windowMs: 60_000 },
      maxInFlight: 4,
    });
    expect(parsed(route({ rate_limit: "100 / h" })).route.control?.rateLimit).toMatchObject({
      count: 100,
      windowMs: 3_600_000,
    });
    expect(parsed(route({ circuit_breaker: true })).route.control?.breaker).toEqual({
      failures: 10,
      probeIntervalMs: 30_000,
    });
    expect(parsed(route({ circuit_breaker: { failures: 3, probe_interval: "5m" } })).route.control?.breaker).toEqual({
      failures: 3,
      probeIntervalMs: 300_000,
    });
    // `paused = false` makes a route pausable from the admin API without limiting it otherwise.
    expect(parsed(route({ paused: false })).route.control).toEqual({
      rateLimit: null,
      maxInFlight: null,
      breaker: null,
      paused: false,
      recover: false,
    });
    // `recover = "auto"` re-drives what died while the breaker was open (docs/operating.md), so it needs a breaker.
    expect(parsed(route({ circuit_breaker: true, recover: "auto" })).route.control?.recover).toBe(true);
    expect(parsed(route({ circuit_breaker: true, recover: "off" })).route.control?.recover).toBe(false);
    expect(parsed(route({ paused: true })).route.control?.paused).toBe(true);
  });

  it("names every mistake in a control option", () => {
    for (const rate of ["20", "20/week", "0/s", "1001/s", 20, "x/s", "-1/s"]) {
      expect(problemsOf(route({ rate_limit: rate }))).toEqual([
        expect.stringMatching(/^SOURCES\.example route r: rate_limit must be "<count>\/<s\|min\|h>"/),
      ]);
    }
    for (const limit of [0, 1.5, "4", -2, 1001]) {
      expect(problemsOf(route({ max_in_flight: limit }))).toEqual([
        expect.stringMatching(/^SOURCES\.example route r: max_in_flight must be a whole number from 1 to 1000/),
      ]);
    }
    expect(problemsOf(route({ circuit_breaker: "on" }))).toEqual([
      expect.stringMatching(/route r: circuit_breaker must be true or a table/),
    ]);
    expect(problemsOf(route({ circuit_breaker: { failures: 0 } }))).toEqual([
      expect.stringMatching(/route r: circuit_breaker\.failures must be a whole number from 1 to 1000/),
    ]);
    expect(problemsOf(route({ circuit_breaker: { probe_interval: "100ms" } }))).toEqual([
      expect.stringMatching(/route r: circuit_breaker\.probe_interval must be a duration from "1s" to "12h"/),
    ]);
    expect(problemsOf(route({ circuit_breaker: { probe_interval: "13h" } }))).toEqual([
      expect.stringMatching(/circuit_breaker\.probe_interval must be a duration/),
    ]);
    expect(problemsOf(route({ circuit_breaker: { failure: 3 } }))).toEqual([
      expect.stringMatching(/route r: unknown circuit_breaker option "failure"/),
    ]);
    expect(problemsOf(route({ paused: "yes" }))).toEqual([
      expect.stringMatching(/route r: paused must be true or false/),
    ]);
    // Route options: beside a source's own destination they are not a source's options.
    expect(problemsOf({ destination: "https://hooks.example.com/x", rate_limit: "1/s", paused: true })).toEqual([
      expect.stringMatching(/^SOURCES\.example: rate_limit belongs to a route/),
      expect.stringMatching(/^SOURCES\.example: paused belongs to a route/),
    ]);
  });
});

describe("a source's routes, mistakes", () => {
  it("names every mistake in a route: its name, destination, options, filter, schema and transform", () => {
    expect(problemsOf({ routes: [{ name: "Bad Name", destination: "handler:accounts" }] })).toEqual([
      expect.stringMatching(/name must match/),
    ]);
    expect(problemsOf({ routes: [{ name: "r" }] })).toEqual([
      expect.stringMatching(/route r: destination is required/),
    ]);
    expect(problemsOf({ routes: [{ name: "r", destination: "handler:accounts", filtr: {} }] })).toEqual([
      expect.stringMatching(/unknown route option "filtr"/),
    ]);
    expect(problemsOf({ routes: [{ name: "r", destination: "ftp://x" }] })).toEqual([
      expect.stringMatching(/route r: destination "ftp:\/\/x" is neither/),
    ]);
    expect(
      problemsOf({ routes: [{ name: "r", destination: "handler:accounts", filter: { type: { $where: "1" } } }] }),
    ).toEqual(["SOURCES.example route r: filter: unsupported operator $where"]);
    expect(problemsOf({ routes: [{ name: "r", destination: "handler:accounts", schema: "{oops" }] })).toEqual([
      expect.stringMatching(/route r: schema is a string but not JSON/),
    ]);
    expect(problemsOf({ routes: [{ name: "r", destination: "handler:accounts", transform: "$$$(" }] })).toEqual([
      expect.stringMatching(/route r: transform is not a valid JSONata expression/),
    ]);
    expect(problemsOf({ routes: [{ name: "r", destination: "handler:nope" }] })).toEqual([
      'SOURCES.example: no handler named "nope" is registered',
    ]);
    expect(problemsOf({ routes: [{ name: "r", destination: "handler:accounts", headers: { "x-a": "'1'" } }] })).toEqual(
      ["SOURCES.example: route r: headers apply to a forward (an https destination) only"],
    );
    expect(
      problemsOf({
        routes: [{ name: "r", destination: "https://x.example.com/", headers: { "idempotency-key": "'1'" } }],
      }),
    ).toEqual([expect.stringMatching(/route r: headers: header idempotency-key is set by the forward itself/)]);
  });

  it("keeps route options in routes: beside a source's own destination they are refused, as is a destination given twice", () => {
    expect(problemsOf({ destination: "handler:accounts", filter: { type: "x" } })).toEqual([
      expect.stringMatching(/filter belongs to a route/),
    ]);
    expect(
      problemsOf({ destination: "handler:accounts", routes: [{ name: "r", destination: "handler:accounts" }] }),
    ).toEqual([expect.stringMatching(/give the destination in the route, not beside routes/)]);
    expect(problemsOf({ routes: [] })).toEqual([expect.stringMatching(/routes is empty/)]);
    expect(problemsOf({ routes: { name: "r" } })).toEqual([expect.stringMatching(/routes must be a list of tables/)]);
  });
});

describe("a bad route, as operators see it", () => {
  it("takes its source alone out of service, with the problem named in /admin/api/sources", async () => {
    const brokenEnv = {
      ...env,
      SOURCES: {
        ...(env.SOURCES as Record<string, unknown>),
        "routing-typo": {
          ...base,
          secrets: ["DEMO_WEBHOOK_SECRET"],
          routes: [{ name: "slack", destination: "https://hooks.example.com/x", transform: '{ "text": ' }],
        },
      },
    } as Env;
    const response = await app.fetch(
      new Request("https://receiver.test/admin/api/sources", { headers: ADMIN }),
      brokenEnv,
    );
    const body = await response.json<{ valid: string[]; invalid: Record<string, string[]> }>();
    expect(body.valid).toContain("demo");
    expect(body.valid).toContain("routing-slack");
    expect(body.invalid).toEqual({
      "routing-typo": [
        expect.stringMatching(/^SOURCES\.routing-typo route slack: transform is not a valid JSONata expression/),
      ],
    });
  });
});
