import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import {
  nextRetryDelaySeconds,
  parseRetryAfter,
  QUEUE_MAX_DELAY_SECONDS,
  retryDelaySeconds,
} from "../../src/consumers/decide/retry-schedule";
import { processReceipt } from "../../src/consumers/receipts/process";
import { DEFAULT_RETRY, parseSources, SourceConfigError } from "../../src/sources/config";
import { loadSources } from "../../src/sources/registry";
import { attemptRows, receiptRow, SECOND, seedReceipt } from "./support/processing";

const HOUR = 3600;
const middle = () => 0.5;

describe("the retry schedule", () => {
  it("starts at 30 s, doubles, caps at 24 h, and twelve retries span about 34 hours", () => {
    const delays = Array.from({ length: 12 }, (_, index) => retryDelaySeconds(DEFAULT_RETRY, index + 1, middle));
    expect(delays).toEqual([30, 60, 120, 240, 480, 960, 1920, 3840, 7680, 15360, 30720, 61440]);
    const total = delays.reduce((sum, delay) => sum + delay, 0);
    expect(total / HOUR).toBeCloseTo(34.1, 1);
    expect(retryDelaySeconds(DEFAULT_RETRY, 13, middle)).toBe(24 * HOUR);
    expect(retryDelaySeconds(DEFAULT_RETRY, 40, middle)).toBe(24 * HOUR);
  });

  it("jitters each delay by at most ±20 %, and spreads a burst", () => {
    expect(retryDelaySeconds(DEFAULT_RETRY, 3, () => 0)).toBe(96);
    expect(retryDelaySeconds(DEFAULT_RETRY, 3, () => 0.999999)).toBe(144);
    expect(retryDelaySeconds(DEFAULT_RETRY, 20, () => 0.999999)).toBe(Math.round(24 * HOUR * 1.2));
    const burst = new Set(Array.from({ length: 200 }, () => retryDelaySeconds(DEFAULT_RETRY, 6)));
    expect(burst.size).toBeGreaterThan(50);
    for (const delay of burst) {
      expect(delay).toBeGreaterThanOrEqual(768);
      expect(delay).toBeLessThanOrEqual(1152);
    }
  });

  it("lets a destination's Retry-After replace the backoff, bounded by the cap", () => {
    expect(nextRetryDelaySeconds(DEFAULT_RETRY, 5, 7)).toBe(7);
    expect(nextRetryDelaySeconds(DEFAULT_RETRY, 1, 0)).toBe(1);
    expect(nextRetryDelaySeconds(DEFAULT_RETRY, 1, 10 * 24 * HOUR)).toBe(24 * HOUR);
    const now = Date.parse("2026-11-30T10:00:00Z");
    expect(parseRetryAfter("120", now)).toBe(120);
    expect(parseRetryAfter("Mon, 30 Nov 2026 10:01:30 GMT", now)).toBe(90);
    expect(parseRetryAfter("soon", now)).toBeNull();
    expect(parseRetryAfter(null, now)).toBeNull();
  });

  it("is configurable per source, jitter included, and refuses nonsense", () => {
    expect(loadSources(env).get("proc-forward-ok")!.retry).toEqual({
      baseDelaySeconds: 60,
      maxDelaySeconds: 600,
      maxRetries: 3,
      jitter: 0,
      maxAgeMs: 259_200_000,
    });
    expect(loadSources(env).get("proc-forward-script")!.retry).toEqual(DEFAULT_RETRY);
    const context = { knownProviders: new Set(["standard-webhooks"]), knownHandlers: new Set<string>() };
    const source = (retry: unknown) => ({ s: { provider: "standard-webhooks", secrets: ["S"], retry } });
    expect(() => parseSources(source({ jitter: 1.5 }), context)).toThrow(SourceConfigError);
    expect(() => parseSources(source({ jitter: 1.5 }), context)).toThrow(/retry\.jitter must be a number from 0 to 1/);
    expect(() => parseSources(source({ base_delay_seconds: -1 }), context)).toThrow(/base_delay_seconds/);
    expect(parseSources(source({ jitter: 0 }), context).get("s")!.retry.jitter).toBe(0);
  });
});

describe("retrying from our own storage", () => {
  it("makes 1 attempt + 12 retries on the default schedule, then dead with the last error", async () => {
    const receiptId = await seedReceipt({ source: "proc-forward-refused", payload: { type: "x" } });
    let now = Date.now();
    const waits: number[] = [];
    for (let attempt = 1; attempt <= 12; attempt++) {
      const outcome = await processReceipt(env, receiptId, now);
      expect(outcome.kind).toBe("retry");
      const row = await receiptRow(receiptId);
      expect(row.status).toBe("pending");
      const finishedAt = (await attemptRows(receiptId))[attempt - 1]!.finishedAt!;
      const wait = (row.nextAttemptAt! - finishedAt) / SECOND;
      const planned = Math.min(30 * 2 ** (attempt - 1), 24 * HOUR);
      expect(wait).toBeGreaterThanOrEqual(Math.floor(planned * 0.8));
      expect(wait).toBeLessThanOrEqual(Math.ceil(planned * 1.2));
      // The queue cannot hold a message past 12 h: the message's own delay is capped.
      expect(outcome.kind === "retry" && outcome.delaySeconds).toBe(Math.min(QUEUE_MAX_DELAY_SECONDS, Math.ceil(wait)));
      waits.push(wait);
      now = row.nextAttemptAt!;
    }
    const total = waits.reduce((sum, wait) => sum + wait, 0) / HOUR;
    expect(total).toBeGreaterThan(34.1 * 0.8);
    expect(total).toBeLessThan(34.1 * 1.2);

    expect(await processReceipt(env, receiptId, now)).toEqual({ kind: "done", status: "dead" });
    const dead = await receiptRow(receiptId);
    expect(dead.status).toBe("dead");
    expect(dead.lastError).toMatch(/^gave up after 13 attempts: connection failed/);
    expect(dead.hasBody).toBe(1);
    const attempts = await attemptRows(receiptId);
    expect(attempts).toHaveLength(13);
    expect(attempts.map((attempt) => attempt.outcome)).toEqual([...Array(12).fill("retry"), "dead"]);
    expect(attempts.map((attempt) => attempt.attemptNumber)).toEqual(
      Array.from({ length: 13 }, (_, index) => index + 1),
    );
  });

  it("honours a wait longer than the queue's 12 h limit: an early message only re-checks and goes back", async () => {
    const receiptId = await seedReceipt({ source: "proc-forward-refused", payload: { type: "x" } });
    const now = Date.now();
    await processReceipt(env, receiptId, now);
    // Push the next attempt 20 h out, as the 12th retry's ~17 h (or a long Retry-After) would.
    const dueAt = now + 20 * HOUR * SECOND;
    await env.DB.prepare("UPDATE receipts SET next_attempt_at = ? WHERE id = ?").bind(dueAt, receiptId).run();

    const backAfter12h = await processReceipt(env, receiptId, now + QUEUE_MAX_DELAY_SECONDS * SECOND);
    expect(backAfter12h).toEqual({ kind: "retry", delaySeconds: 8 * HOUR });
    expect(await attemptRows(receiptId)).toHaveLength(1);
    expect((await receiptRow(receiptId)).nextAttemptAt).toBe(dueAt);

    expect(await processReceipt(env, receiptId, dueAt - SECOND)).toEqual({ kind: "retry", delaySeconds: 1 });
    expect(await attemptRows(receiptId)).toHaveLength(1);
    expect((await processReceipt(env, receiptId, dueAt)).kind).toBe("retry");
    expect(await attemptRows(receiptId)).toHaveLength(2);
  });
});
