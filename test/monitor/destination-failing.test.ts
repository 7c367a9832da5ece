import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { processReceipt } from "../../src/consumers/receipts/process";
import {
  DEFAULT_DESTINATION_THRESHOLDS,
  destinationFailingConditions,
  destinationThresholds,
} from "../../src/monitor/destination-failing";
import { receiptRow } from "../consumers/support/processing";
import { CRON_TEST_TIMEOUT_MS, runCron, withOnlySources } from "../reconcile/support";
import { sendCredit, setLane } from "../routing/gate-support";
import { eventually } from "../support/deliveries";
import { issue } from "./issue-support";

/**
 * destination-failing issues (src/monitor/destination-failing.ts): a route without a circuit breaker whose
 * deliveries fail and wait for retries. Through the real route: df-failing (test/fixtures/sources/
 * destination-failing.json) forwards to a lane of the Node stand-in, retrying an hour apart.
 */

const SOURCE = "df-failing";
const KEY = "destination-failing:df-failing:primary";

describe("destination-failing thresholds", () => {
  it("opens from the floor, critical from the second bar, never for a route with a breaker", () => {
    const count = (retrying: number, breaker = false) => ({ source: "s", route: "r", retrying, breaker });
    expect(destinationFailingConditions([count(4)])).toEqual([]);
    expect(destinationFailingConditions([count(5)]).map((c) => c.severity)).toEqual(["warning"]);
    expect(destinationFailingConditions([count(50)]).map((c) => c.severity)).toEqual(["critical"]);
    expect(destinationFailingConditions([count(500, true)])).toEqual([]);
    expect(destinationFailingConditions([count(5)])[0]).toMatchObject({
      kind: "destination-failing",
      source: "s",
      route: "r",
      message:
        "5 deliveries on route r failed and wait for a retry: its destination is failing (the route has no circuit_breaker to hold the rest).",
    });
    expect(destinationThresholds({})).toEqual(DEFAULT_DESTINATION_THRESHOLDS);
    expect(
      destinationThresholds({ DESTINATION_ISSUE_MIN_RETRYING: "2", DESTINATION_ISSUE_CRITICAL_RETRYING: "x" }),
    ).toEqual({ ...DEFAULT_DESTINATION_THRESHOLDS, minRetrying: 2 });
  });
});

describe("destination-failing, through the real route", { timeout: CRON_TEST_TIMEOUT_MS * 2 }, () => {
  it("opens when a route without a breaker keeps failing, and resolves once its deliveries go through", async () => {
    await setLane("df-primary", 503);
    const receipts: string[] = [];
    for (let index = 0; index < 5; index++)
      receipts.push(await sendCredit(SOURCE, { account: `acct_df_${index}`, amount: 1 }));
    await eventually(
      async () => {
        const rows = await Promise.all(receipts.map(receiptRow));
        return rows.every((row) => row.status === "pending" && row.attempts >= 1 && row.lastError !== null)
          ? true
          : undefined;
      },
      60_000,
      "every delivery failed once and waits for its retry",
    );

    await runCron(Date.now(), withOnlySources(SOURCE));
    expect(await issue(KEY, false)).toMatchObject({
      kind: "destination-failing",
      source: SOURCE,
      route: "primary",
      state: "open",
      severity: "warning",
      message:
        "5 deliveries on route primary failed and wait for a retry: its destination is failing (the route has no circuit_breaker to hold the rest).",
    });

    // The destination is back: each retry goes through, and the next run resolves the issue.
    await setLane("df-primary", 204);
    for (const receiptId of receipts) {
      const { nextAttemptAt } = await receiptRow(receiptId);
      expect(await processReceipt(env, receiptId, nextAttemptAt!)).toEqual({ kind: "done", status: "processed" });
    }
    await runCron(Date.now(), withOnlySources(SOURCE));
    expect(await issue(KEY)).toMatchObject({ state: "resolved", resolvedBy: "receiver" });
  });
});
