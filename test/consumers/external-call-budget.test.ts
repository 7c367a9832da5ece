import { describe, expect, it } from "vitest";
import {
  externalCallsFor,
  externalCallTimeoutMs,
  outboundIdempotencyKey,
} from "../../src/consumers/attempt/external-calls";
import { OutcomeUnknown, TransientFailure } from "../../src/handlers/types";
import { MAX_DESTINATION_TIMEOUT_MS, PROCESSING_LEASE_MS } from "../../src/sources/config";
import { standinOrigin, standinRequests } from "./support/processing";

/**
 * A handler's external calls end inside the attempt's lease: each call's timeout is capped, and all the calls of
 * one attempt share one budget, so several of them cannot add up to more than the lease either.
 */

describe("the timeout of a handler's external call", () => {
  it("is what the handler asked for, at most the destination cap, and at most what is left of the attempt's budget", () => {
    expect(externalCallTimeoutMs(undefined, Number.POSITIVE_INFINITY)).toBe(10_000);
    expect(externalCallTimeoutMs(1_500, Number.POSITIVE_INFINITY)).toBe(1_500);
    expect(externalCallTimeoutMs(10 * 60_000, Number.POSITIVE_INFINITY)).toBe(MAX_DESTINATION_TIMEOUT_MS);
    expect(externalCallTimeoutMs(10_000, 2_500)).toBe(2_500);
    expect(externalCallTimeoutMs(10_000, -5)).toBe(0);
    expect(MAX_DESTINATION_TIMEOUT_MS).toBeLessThan(PROCESSING_LEASE_MS);
  });

  it("shares one budget across an attempt's calls: a slow call is cut at the budget, and a later one is not sent", async () => {
    const receiptId = `01BUDGET${Date.now()}`;
    const calls = externalCallsFor(receiptId, Date.now(), 1_200);

    // Well inside the budget: answered.
    const first = await calls.callExternal("first", { url: `${standinOrigin()}/script/200`, timeoutMs: 60_000 });
    expect(first.status).toBe(200);
    await first.body?.cancel();

    // The stand-in answers this one only after 3 s. The handler allows a minute; the attempt's budget does not.
    const started = Date.now();
    const slow = await calls
      .callExternal("slow", { url: `${standinOrigin()}/script/hang`, timeoutMs: 60_000 })
      .catch((error: unknown) => error);
    expect(slow).toBeInstanceOf(OutcomeUnknown);
    expect(Date.now() - started).toBeLessThan(2_500);

    // Nothing is left: the next call fails as a retry without reaching the destination.
    const late = await calls
      .callExternal("late", { url: `${standinOrigin()}/script/200` })
      .catch((error: unknown) => error);
    expect(late).toBeInstanceOf(TransientFailure);
    expect((late as Error).message).toContain("used up");
    expect(await standinRequests(outboundIdempotencyKey(receiptId, "late"))).toEqual([]);
    expect(await standinRequests(outboundIdempotencyKey(receiptId, "slow"))).toHaveLength(1);
  });
});
