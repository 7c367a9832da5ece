import { env } from "cloudflare:workers";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { processReceipt } from "../../src/consumers/receipts/process";
import {
  attemptRows,
  envWithSources,
  receiptRow,
  SECOND,
  seedReceipt,
  standinOrigin,
  standinRequests,
} from "./support/processing";

/**
 * A forward destination served by the Node stand-in (test/setup/global/forward-standin.ts). The source
 * proc-forward-script points at a script that fails (500), hangs past the 1500 ms forward timeout, answers 429
 * with Retry-After: 7, then accepts. The clock is injected so the backoff can be stepped through.
 */
describe("forwarding to a destination that fails, times out, throttles, then succeeds", () => {
  it("retries each transient failure on schedule with the same key, and records every attempt", async () => {
    const payload = { type: "order.paid", data: { order: "ord_1" } };
    const receiptId = await seedReceipt({ source: "proc-forward-script", payload, eventType: "order.paid" });
    const t0 = Date.now();

    // 1: the destination answers 500 — transient, retried after 30 s ± 20 %.
    expect(await processReceipt(env, receiptId, t0)).toMatchObject({ kind: "retry" });
    const afterFirst = await receiptRow(receiptId);
    expect(afterFirst.status).toBe("pending");
    expect(afterFirst.lastError).toBe("destination answered 500");
    const firstWait = afterFirst.nextAttemptAt! - t0;
    expect(firstWait).toBeGreaterThanOrEqual(24 * SECOND);
    expect(firstWait).toBeLessThanOrEqual(36 * SECOND + 5 * SECOND);

    // Not due yet: a message arriving early takes no attempt and is told how long to wait.
    const early = await processReceipt(env, receiptId, t0 + 10 * SECOND);
    expect(early.kind).toBe("retry");
    expect(early.kind === "retry" && early.delaySeconds).toBeGreaterThanOrEqual(13);
    expect(await attemptRows(receiptId)).toHaveLength(1);

    // 2: the destination hangs past the timeout. It may have acted, so the outcome is unknown — not a failure.
    const t1 = afterFirst.nextAttemptAt!;
    expect(await processReceipt(env, receiptId, t1)).toMatchObject({ kind: "retry" });
    const afterSecond = await receiptRow(receiptId);
    expect(afterSecond.status).toBe("pending");
    expect(afterSecond.lastError).toMatch(/no answer within 1500 ms/);
    const secondWait = afterSecond.nextAttemptAt! - t1;
    expect(secondWait).toBeGreaterThanOrEqual(48 * SECOND);
    expect(secondWait).toBeLessThanOrEqual(72 * SECOND + 5 * SECOND);

    // 3: 429 with Retry-After: 7 — the destination's own wait replaces our 2-minute backoff.
    const t2 = afterSecond.nextAttemptAt!;
    expect(await processReceipt(env, receiptId, t2)).toEqual({ kind: "retry", delaySeconds: 7 });
    const afterThird = await receiptRow(receiptId);
    const thirdAttempt = (await attemptRows(receiptId))[2]!;
    expect(afterThird.nextAttemptAt! - thirdAttempt.finishedAt!).toBe(7 * SECOND);

    // 4: accepted.
    const t3 = afterThird.nextAttemptAt!;
    expect(await processReceipt(env, receiptId, t3)).toEqual({ kind: "done", status: "processed" });
    const done = await receiptRow(receiptId);
    expect(done).toMatchObject({
      status: "processed",
      attempts: 4,
      lastError: null,
      leaseUntil: null,
      nextAttemptAt: null,
    });

    const attempts = await attemptRows(receiptId);
    expect(attempts.map(({ attemptNumber, outcome, httpStatus }) => ({ attemptNumber, outcome, httpStatus }))).toEqual([
      { attemptNumber: 1, outcome: "retry", httpStatus: 500 },
      { attemptNumber: 2, outcome: "unknown", httpStatus: null },
      { attemptNumber: 3, outcome: "retry", httpStatus: 429 },
      { attemptNumber: 4, outcome: "processed", httpStatus: 200 },
    ]);
    expect(attempts.map((attempt) => attempt.startedAt)).toEqual([t0, t1, t2, t3]);
    for (const attempt of attempts) {
      expect(attempt.finishedAt! - attempt.startedAt).toBe(attempt.durationMs);
    }
    expect(attempts[1]!.durationMs).toBeGreaterThanOrEqual(1500);
    expect(attempts[1]!.error).toMatch(/no answer within 1500 ms/);
    expect(attempts[3]!.error).toBeNull();

    // The destination saw four requests, every one under the receipt's key, each signed verifiably.
    const seen = await standinRequests(receiptId);
    expect(seen.map((request) => request.answer)).toEqual([500, "hung", 429, 200]);
    const verifier = new Webhook(env.GATEWAY_SIGNING_SECRET);
    for (const request of seen) {
      expect(request.headers["idempotency-key"]).toBe(receiptId);
      expect(request.headers["webhook-id"]).toBe(receiptId);
      expect(request.headers["x-webhook-event-type"]).toBe("order.paid");
      expect(request.body).toBe(JSON.stringify(payload));
      expect(() => verifier.verify(request.body, request.headers)).not.toThrow();
    }

    // Once processed, further messages for it forward nothing.
    expect(await processReceipt(env, receiptId, t3 + 60 * SECOND)).toEqual({ kind: "done", status: "processed" });
    expect(await standinRequests(receiptId)).toHaveLength(4);
  });

  it("sends a 4xx other than 408/429 straight to dead with its last error and payload kept", async () => {
    const receiptId = await seedReceipt({ source: "proc-forward-gone", payload: { type: "x" } });
    expect(await processReceipt(env, receiptId)).toEqual({ kind: "done", status: "dead" });
    expect(await receiptRow(receiptId)).toMatchObject({
      status: "dead",
      lastError: "destination answered 404",
      hasBody: 1,
      attempts: 1,
    });
    expect(await attemptRows(receiptId)).toMatchObject([
      { outcome: "dead", httpStatus: 404, error: "destination answered 404" },
    ]);
  });

  it("sends a redirect straight to dead without following it: a 3xx is not a delivery", async () => {
    for (const status of [301, 302, 307, 308]) {
      const source = `proc-forward-moved-${status}`;
      const movedEnv = envWithSources({
        [source]: {
          provider: "standard-webhooks",
          secrets: ["DEMO_WEBHOOK_SECRET"],
          destination: `${standinOrigin()}/status/${status}`,
        },
      });
      const receiptId = await seedReceipt({ source, payload: { type: "x" } });
      expect(await processReceipt(movedEnv, receiptId), `${status}`).toEqual({ kind: "done", status: "dead" });
      expect(await receiptRow(receiptId)).toMatchObject({
        status: "dead",
        lastError: `destination answered ${status}`,
        hasBody: 1,
        attempts: 1,
      });
      expect(await attemptRows(receiptId)).toMatchObject([{ outcome: "dead", httpStatus: status }]);
      expect(await standinRequests(receiptId)).toHaveLength(1);
    }
  });

  it("retries a refused connection as transient, with no HTTP status", async () => {
    const receiptId = await seedReceipt({ source: "proc-forward-refused", payload: { type: "x" } });
    expect(await processReceipt(env, receiptId)).toMatchObject({ kind: "retry" });
    expect(await receiptRow(receiptId)).toMatchObject({
      status: "pending",
      lastError: expect.stringMatching(/^connection failed/),
    });
    expect(await attemptRows(receiptId)).toMatchObject([{ outcome: "retry", httpStatus: null }]);
  });
});
