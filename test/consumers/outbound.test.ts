import { describe, expect, it } from "vitest";
import { outboundIdempotencyKey } from "../../src/consumers/attempt/external-calls";
import { processReceipt } from "../../src/consumers/receipts/process";
import { account } from "../support/deliveries";
import { testEnv } from "./support/handlers";
import { attemptRows, receiptRow, SECOND, seedReceipt, standinOrigin, standinRequests } from "./support/processing";

/** A handler's external call ("notify", then a D1 credit) against the Node stand-in. */
async function seedExternal(accountId: string, script: string): Promise<string> {
  return seedReceipt({
    source: "proc-external",
    payload: { account: accountId, callUrl: `${standinOrigin()}/script/${script}`, timeoutMs: 1500 },
  });
}

describe("effects outside D1", () => {
  it("records a timeout after the request was sent as unknown, and retries it under the same key", async () => {
    const receiptId = await seedExternal("acct_external_timeout", "hang,200");
    const key = outboundIdempotencyKey(receiptId, "notify");
    expect(key).toBe(`${receiptId}.notify`);
    const t0 = Date.now();

    expect((await processReceipt(testEnv, receiptId, t0)).kind).toBe("retry");
    const pending = await receiptRow(receiptId);
    expect(pending.status).toBe("pending");
    expect(pending.lastError).toMatch(/^notify: no answer within 1500 ms; the destination may have applied it/);
    expect(await attemptRows(receiptId)).toMatchObject([{ outcome: "unknown", httpStatus: null }]);
    // The D1 half of the effect did not commit: the attempt's batch never ran.
    expect(await account("acct_external_timeout")).toBeNull();

    expect(await processReceipt(testEnv, receiptId, pending.nextAttemptAt!)).toEqual({
      kind: "done",
      status: "processed",
    });
    expect((await account("acct_external_timeout"))?.credits).toBe(1);
    const calls = await standinRequests(key);
    expect(calls.map((call) => call.answer)).toEqual(["hung", 200]);
    expect(calls.every((call) => call.headers["idempotency-key"] === key)).toBe(true);
  });

  it("retries a 503 or a 408 with its status recorded, and dead-letters a 422 straight away", async () => {
    for (const status of [503, 408]) {
      const flaky = await seedExternal(`acct_external_${status}`, `${status},200`);
      expect((await processReceipt(testEnv, flaky)).kind).toBe("retry");
      expect(await attemptRows(flaky)).toMatchObject([
        { outcome: "retry", httpStatus: status, error: `notify: destination answered ${status}` },
      ]);
    }

    const refused = await seedExternal("acct_external_422", "422");
    expect(await processReceipt(testEnv, refused)).toEqual({ kind: "done", status: "dead" });
    expect(await receiptRow(refused)).toMatchObject({ status: "dead", lastError: "notify: destination answered 422" });
    expect(await account("acct_external_422")).toBeNull();
  });

  it("keeps the key when a 429's Retry-After is honoured", async () => {
    const receiptId = await seedExternal("acct_external_429", "429:42,200");
    const t0 = Date.now();
    expect(await processReceipt(testEnv, receiptId, t0)).toEqual({ kind: "retry", delaySeconds: 42 });
    const { nextAttemptAt } = await receiptRow(receiptId);
    expect(nextAttemptAt! - (await attemptRows(receiptId))[0]!.finishedAt!).toBe(42 * SECOND);
    expect(await processReceipt(testEnv, receiptId, nextAttemptAt!)).toEqual({ kind: "done", status: "processed" });
    const calls = await standinRequests(outboundIdempotencyKey(receiptId, "notify"));
    expect(calls.map((call) => call.answer)).toEqual([429, 200]);
  });
});
