import { describe, expect, it } from "vitest";
import { MAX_BODY_BYTES_LIMIT, type SourceConfig, usableSecrets } from "../../src/sources/config";
import { parsed, problemsOf } from "../support/source-tables";

/**
 * Source tables at the exact edges of what they accept (src/sources/config.ts, body-threshold.ts): the largest
 * values a key allows, the smallest, retentions that are equal, and forward URLs that only look like loopback.
 */

describe("a source table's numbers, at their edges", () => {
  it("takes jitter 1 and 0, and refuses just over 1", () => {
    expect(parsed({ retry: { jitter: 1 } }).retry.jitter).toBe(1);
    expect(parsed({ retry: { jitter: 0 } }).retry.jitter).toBe(0);
    expect(problemsOf({ retry: { jitter: 1.0001 } })).toEqual([expect.stringContaining("retry.jitter")]);
  });

  it("takes max_body_bytes of exactly the limit, and refuses one byte more", () => {
    expect(parsed({ max_body_bytes: MAX_BODY_BYTES_LIMIT }).maxBodyBytes).toBe(MAX_BODY_BYTES_LIMIT);
    expect(problemsOf({ max_body_bytes: MAX_BODY_BYTES_LIMIT + 1 })).toEqual([
      expect.stringContaining("max_body_bytes must be a whole number of bytes"),
    ]);
  });

  it("takes a payload_retention equal to dedupe_retention, and refuses a longer one", () => {
    const equal = parsed({ payload_retention: "30d", dedupe_retention: "30d" });
    expect(equal.payloadRetentionMs).toBe(equal.dedupeRetentionMs);
    expect(problemsOf({ payload_retention: "31d", dedupe_retention: "30d" })).toEqual([
      expect.stringContaining("payload_retention cannot outlast dedupe_retention"),
    ]);
  });

  it("takes r2_body_threshold 0 (every body to R2), and refuses a negative or fractional one", () => {
    expect(problemsOf({ r2_body_threshold: 0 })).toEqual([]);
    expect(problemsOf({ r2_body_threshold: -1 })).toEqual([expect.stringContaining("r2_body_threshold")]);
    expect(problemsOf({ r2_body_threshold: 1.5 })).toEqual([expect.stringContaining("r2_body_threshold")]);
  });
});

describe("a forward URL over plain http", () => {
  it("is taken to a loopback address only", () => {
    for (const allowed of [
      "http://127.0.0.1:8080/in",
      "http://localhost/in",
      "http://api.localhost/in",
      "http://[::1]/in",
    ])
      expect(problemsOf({ destination: allowed }), allowed).toEqual([]);
  });

  it("is refused to a host that only looks like loopback: a suffix, a longer name, a public address", () => {
    for (const refused of [
      "http://evillocalhost/in",
      "http://localhost.evil.example/in",
      "http://127.0.0.1.evil.example/in",
      "http://203.0.113.7/in",
    ])
      expect(problemsOf({ destination: refused }), refused).toEqual([expect.stringContaining("must be an https URL")]);
  });
});

describe("a signing secret's expires", () => {
  it("is usable until the millisecond before it, and neither usable nor missing from that millisecond", () => {
    const expiresAt = Date.parse("2026-12-01T00:00:00Z");
    const source = parsed({ secrets: [{ name: "ROTATING", expires: "2026-12-01T00:00:00Z" }] }) as SourceConfig;
    const env = { ROTATING: "a-secret-value" };
    expect(usableSecrets(source, env, expiresAt - 1)).toEqual({
      secrets: [{ name: "ROTATING", value: "a-secret-value" }],
      missing: [],
    });
    expect(usableSecrets(source, env, expiresAt)).toEqual({ secrets: [], missing: [] });
  });
});
