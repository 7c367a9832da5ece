import { describe, expect, it } from "vitest";
import { expectedRate } from "../../src/sources/expected-rate";
import { parsed, problemsOf } from "../support/source-tables";

/** `expected_rate` (src/sources/expected-rate.ts): optional, a number of events a second above 0, checked with the table. */

describe("expected_rate", () => {
  it("takes a whole or fractional rate, and is absent unless set", () => {
    expect(expectedRate(parsed({ expected_rate: 1000 }).options)).toBe(1000);
    expect(expectedRate(parsed({ expected_rate: 0.5 }).options)).toBe(0.5);
    expect(expectedRate(parsed({}).options)).toBeNull();
  });

  it.each([0, -5, "1000", "1k/s", Number.NaN, Number.POSITIVE_INFINITY, [1000]])(
    "refuses %o, naming the key",
    (value) => {
      expect(problemsOf({ expected_rate: value })).toEqual([
        `SOURCES.example: expected_rate must be a number of events a second above 0, such as 25 or 0.5 (got ${JSON.stringify(value)})`,
      ]);
    },
  );
});
