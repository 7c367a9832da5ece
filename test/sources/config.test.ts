import { describe, expect, it } from "vitest";
import {
  DEFAULT_RETRY,
  MAX_DESTINATION_TIMEOUT_MS,
  PROCESSING_LEASE_MS,
  parseSource,
  parseSources,
  parseSourceTables,
  SourceConfigError,
} from "../../src/sources/config";
import { base, context, parsed, problemsOf } from "../support/source-tables";

describe("each source table is checked on its own", () => {
  it("keeps the valid sources and names the broken ones with their problems", () => {
    const tables = parseSourceTables(
      {
        good: { ...base, destination: "handler:accounts" },
        "no-handler": { ...base, destination: "handler:billing" },
        "no-provider": { provider: "carrier-pigeon", secrets: ["S"] },
      },
      context,
    );
    expect([...tables.sources.keys()]).toEqual(["good"]);
    expect(Object.fromEntries(tables.problems)).toEqual({
      "no-handler": ['SOURCES.no-handler: no handler named "billing" is registered'],
      "no-provider": ['SOURCES.no-provider: unsupported provider "carrier-pigeon"'],
    });
  });

  it("still refuses everything when SOURCES itself is not a table, and parseSources stays all-or-nothing", () => {
    expect(() => parseSourceTables("not a table", context)).toThrow(SourceConfigError);
    expect(() => parseSources({ good: base, bad: { ...base, destination: "handler:billing" } }, context)).toThrow(
      SourceConfigError,
    );
  });
});

describe("a key no source or provider reads", () => {
  it("is refused by name with the key it was probably meant to be, instead of ignored (issue 37: a typo'd destination)", () => {
    expect(parseSource("example", { ...base, destinaton: "handler:accounts" }, context)).toEqual({
      ok: false,
      problems: ['SOURCES.example: unknown option "destinaton" (did you mean "destination"?)'],
    });
  });

  it("names `secrets` for `secret`, alongside the missing secrets, and every unknown key at once", () => {
    expect(parseSource("example", { provider: "stripe", secret: ["S"], destination: "none" }, context)).toEqual({
      ok: false,
      problems: [
        "SOURCES.example: secrets must name at least one Worker secret",
        'SOURCES.example: unknown option "secret" (did you mean "secrets"?)',
      ],
    });
    expect(problemsOf({ destination: "none", tolerance_secnds: 60, colour: "blue" })).toEqual([
      'SOURCES.example: unknown option "tolerance_secnds" (did you mean "tolerance_seconds"?)',
      expect.stringMatching(
        /^SOURCES\.example: unknown option "colour" \(neither a source key nor any provider's option/,
      ),
    ]);
  });

  it("takes every provider's own keys (src/providers/option-keys.ts) and a route's mistyped key with a suggestion", () => {
    expect(problemsOf({ destination: "none", tolerance_seconds: 60, type_path: "kind" })).toEqual([]);
    expect(problemsOf({ routes: [{ name: "r", destination: "none", ordred_by: "subject" }] })).toEqual([
      expect.stringMatching(/unknown route option "ordred_by" \(did you mean "ordered_by"\? a route takes/),
    ]);
  });
});

describe("retry policy", () => {
  it("defaults to a three-day deadline and reads max_age", () => {
    expect(parsed({}).retry).toEqual(DEFAULT_RETRY);
    expect(DEFAULT_RETRY.maxAgeMs).toBe(3 * 86_400_000);
    expect(parsed({ retry: { max_age: "36h" } }).retry.maxAgeMs).toBe(36 * 3_600_000);
  });

  it("takes max_retries as a whole number, 0 included, and refuses fractions and negatives", () => {
    expect(parsed({ retry: { max_retries: 0 } }).retry.maxRetries).toBe(0);
    expect(parsed({ retry: { max_retries: 5 } }).retry.maxRetries).toBe(5);
    for (const bad of [2.5, -1, "3", Number.NaN]) {
      expect(problemsOf({ retry: { max_retries: bad } }), String(bad)).toEqual([
        expect.stringContaining("SOURCES.example: retry.max_retries must be a whole number"),
      ]);
    }
  });

  it("refuses a retry value that is not a table", () => {
    expect(problemsOf({ retry: "12" })).toEqual(["SOURCES.example: retry must be a table"]);
  });
});

describe("durations are read or refused, never silently defaulted", () => {
  const keys = [
    ["expect_within", (value: unknown) => ({ expect_within: value })],
    ["alert_pending_after", (value: unknown) => ({ alert_pending_after: value })],
    ["payload_retention", (value: unknown) => ({ payload_retention: value })],
    ["dedupe_retention", (value: unknown) => ({ dedupe_retention: value, payload_retention: "1ms" })],
    ["dead_letter_retention", (value: unknown) => ({ dead_letter_retention: value })],
    ["forward_timeout", (value: unknown) => ({ forward_timeout: value, destination: "https://example.com/hook" })],
    ["retry.max_age", (value: unknown) => ({ retry: { max_age: value } })],
  ] as const;

  for (const [key, table] of keys) {
    it(`refuses an unreadable ${key}`, () => {
      for (const bad of ["3 days", "1w", "soon", "", true, -5]) {
        const problems = problemsOf(table(bad));
        expect(problems, `${key} = ${JSON.stringify(bad)}`).toHaveLength(1);
        expect(problems[0]).toContain(key);
        expect(problems[0]).toContain("SOURCES.example");
      }
    });
  }

  it("reads the documented forms", () => {
    const source = parsed({
      payload_retention: "2d",
      dedupe_retention: "40d",
      expect_within: "90m",
      alert_pending_after: "2h",
    });
    expect(source.payloadRetentionMs).toBe(2 * 86_400_000);
    expect(source.dedupeRetentionMs).toBe(40 * 86_400_000);
    expect(source.expectWithinMs).toBe(90 * 60_000);
  });

  it("keeps a dead letter's body for the key's lifetime unless dead_letter_retention says less, within the other two", () => {
    expect(parsed({ dedupe_retention: "40d" }).deadLetterRetentionMs).toBe(40 * 86_400_000);
    expect(parsed({ dead_letter_retention: "14d" }).deadLetterRetentionMs).toBe(14 * 86_400_000);
    expect(problemsOf({ dead_letter_retention: "36d" })).toEqual([
      expect.stringMatching(/dead_letter_retention cannot outlast dedupe_retention/),
    ]);
    expect(problemsOf({ dead_letter_retention: "6d" })).toEqual([
      expect.stringMatching(/dead_letter_retention cannot be shorter than payload_retention/),
    ]);
    expect(problemsOf({ dead_letter_retention: "2d", payload_retention: "2d", dedupe_retention: "2d" })).toEqual([]);
  });
});

describe("destination timeouts stay inside the processing lease", () => {
  const forward = (timeout: unknown) => ({ destination: "https://example.com/hook", forward_timeout: timeout });

  it("caps them a minute below the five-minute lease", () => {
    expect(PROCESSING_LEASE_MS).toBe(5 * 60_000);
    expect(MAX_DESTINATION_TIMEOUT_MS).toBe(4 * 60_000);
  });

  it("accepts up to the cap and refuses anything longer, naming the source and the key", () => {
    expect(parsed(forward("4m")).destination).toEqual({
      kind: "forward",
      url: "https://example.com/hook",
      timeoutMs: 240_000,
    });
    expect(parsed(forward("30s")).destination).toMatchObject({ timeoutMs: 30_000 });
    for (const tooLong of ["10m", "241s", "1h"]) {
      expect(problemsOf(forward(tooLong)), tooLong).toEqual([
        expect.stringMatching(/^SOURCES\.example: forward_timeout must be at most 4m.*lease/),
      ]);
    }
    expect(problemsOf(forward("0s"))).toEqual([expect.stringContaining("forward_timeout must be longer than zero")]);
  });
});

describe("claim shard placement", () => {
  it("has none by default", () => {
    expect(parsed({}).placement).toEqual({ locationHint: null, jurisdiction: null });
  });

  it("reads every documented location hint and jurisdiction", () => {
    for (const hint of ["wnam", "enam", "sam", "weur", "eeur", "apac", "oc", "afr", "me"]) {
      expect(parsed({ location_hint: hint }).placement.locationHint).toBe(hint);
    }
    for (const jurisdiction of ["eu", "fedramp"]) {
      expect(parsed({ jurisdiction }).placement.jurisdiction).toBe(jurisdiction);
    }
    expect(parsed({ location_hint: "weur", jurisdiction: "eu" }).placement).toEqual({
      locationHint: "weur",
      jurisdiction: "eu",
    });
  });

  it("refuses unknown values with a message naming the source and the key", () => {
    expect(problemsOf({ location_hint: "europe" })).toEqual([
      'SOURCES.example: location_hint must be one of wnam, enam, sam, weur, eeur, apac, oc, afr, me (got "europe")',
    ]);
    expect(problemsOf({ location_hint: "WEUR" })).toHaveLength(1);
    expect(problemsOf({ jurisdiction: "EU" })).toEqual([
      expect.stringMatching(/^SOURCES\.example: jurisdiction must be one of eu, fedramp.* \(got "EU"\)$/),
    ]);
    expect(problemsOf({ jurisdiction: ["eu"] })).toHaveLength(1);
  });
});

describe("forward destinations", () => {
  it("take https, and plain http only to a loopback address (local development)", () => {
    for (const url of [
      "https://api.example.com/hooks",
      "http://127.0.0.1:8080/hooks",
      "http://localhost:3000/x",
      "http://[::1]:9000/",
    ]) {
      expect(parsed({ destination: url }).destination).toMatchObject({ kind: "forward", url });
    }
  });
  it("refuse plain http to any other host, and a URL that does not parse, saying why", () => {
    expect(problemsOf({ destination: "http://api.example.com/hooks" })).toEqual([
      expect.stringMatching(
        /destination "http:\/\/api\.example\.com\/hooks" must be an https URL \(plain http only to a loopback address/,
      ),
    ]);
    expect(problemsOf({ destination: "http://10.0.0.5/hooks" })).toEqual([
      expect.stringContaining("must be an https URL"),
    ]);
    expect(problemsOf({ destination: "https://" })).toEqual([expect.stringContaining("is not a valid URL")]);
  });
});
