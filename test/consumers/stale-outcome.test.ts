import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { commitAttempts } from "../../src/consumers/commit/commit";
import type { FinishedAttempt } from "../../src/consumers/commit/commit-statements";
import { loadReceipts } from "../../src/consumers/load/load";
import { processBatch, processReceipt } from "../../src/consumers/receipts/process";
import { database } from "../../src/db/client";
import { accountsHandler } from "../../src/handlers/accounts";
import type { HandlerPlan } from "../../src/handlers/types";
import { loadSources } from "../../src/sources/registry";
import { account, planChange } from "../support/deliveries";
import { receiptRow, seedReceipt } from "./support/processing";

/**
 * The shipped `accounts` handler losing a version race. Its only ordering mechanism is the plan's version gate:
 * the stale verdict is never committed together with — or after — a "processed" that applied nothing. The races
 * are set up by ordering, never by timing: two events in one consumer batch, or a newer version committed between
 * a handler's plan and its commit.
 */

/** Plan changes for one account, seeded on the demo source (handler:accounts) and not enqueued: the test drives them. */
async function seedPlanChange(accountId: string, version: number, receivedAt = Date.now()): Promise<string> {
  return seedReceipt({
    source: "demo",
    eventType: "account.plan_changed",
    version,
    receivedAt,
    payload: planChange(accountId, `plan_v${version}`, version),
  });
}

async function committedAt(receiptId: string): Promise<number | null> {
  const row = await env.DB.prepare("SELECT committed_at AS committedAt FROM receipts WHERE id = ?")
    .bind(receiptId)
    .first<{ committedAt: number | null }>();
  return row!.committedAt;
}

/** Runs the shipped handler for a receipt now and returns its attempt, ready to commit later. */
async function planNow(receiptId: string, now: number): Promise<FinishedAttempt> {
  const [receipt] = await loadReceipts(database(env), [receiptId]);
  const plan = (await accountsHandler(
    {
      receiptId,
      source: receipt!.source,
      eventKey: receipt!.eventKey,
      eventType: receipt!.eventType,
      subjectId: receipt!.subjectId,
      version: receipt!.version,
      occurredAt: receipt!.occurredAt,
      payload: JSON.parse(new TextDecoder().decode(receipt!.body!)),
    },
    {
      db: env.DB,
      env,
      now,
      idempotencyKey: () => receiptId,
      callExternal: () => Promise.reject(new Error("the accounts handler makes no external call")),
    },
  )) as Extract<HandlerPlan, { outcome: "apply" }>;
  expect(plan.outcome).toBe("apply");
  return {
    receipt: receipt!,
    run: { result: { status: "processed" }, plan },
    facts: {
      policy: loadSources(env).get("demo")!.retry,
      attemptNumberInRun: 1,
      budgetStartedAt: receipt!.receivedAt,
      finishedAt: now + 1,
    },
    startedAt: now,
    generation: receipt!.leaseGeneration + 1,
    leased: false,
  };
}

/** The real D1, whose connection is lost after `batches` batches: a crash between two of the consumer's writes. */
function d1LostAfter(batches: number): D1Database {
  let left = batches;
  return new Proxy(env.DB, {
    get(target, property) {
      if (property === "batch") {
        return (statements: D1PreparedStatement[]) => {
          if (left-- <= 0) return Promise.reject(new Error("D1_ERROR: Network connection lost."));
          return target.batch(statements);
        };
      }
      const value = Reflect.get(target, property);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

describe("the accounts handler losing a version race", () => {
  it("records the older of two plan changes in one consumer batch as stale against the version that won, applying nothing", async () => {
    const t0 = Date.now();
    // The newer event first in the batch: its gate wins, and the older one's gate then changes nothing.
    const v7 = await seedPlanChange("acct_race_batch", 7, t0 - 2);
    const v5 = await seedPlanChange("acct_race_batch", 5, t0 - 1);
    const verdicts = await processBatch(env, [v7, v5], t0);

    expect(verdicts.get(v7)).toEqual({ kind: "done", status: "processed" });
    expect(verdicts.get(v5)).toEqual({ kind: "done", status: "stale" });
    expect(await receiptRow(v7)).toMatchObject({ status: "processed", staleAgainstVersion: null, attempts: 1 });
    expect(await receiptRow(v5)).toMatchObject({ status: "stale", staleAgainstVersion: 7, attempts: 1 });
    expect(await committedAt(v5)).not.toBeNull();
    expect(await account("acct_race_batch")).toMatchObject({ plan: "plan_v7", planVersion: 7 });
  });

  it("records the second of two different plan changes carrying the same version in one batch as stale, applying only the first", async () => {
    const t0 = Date.now();
    // Both plan "apply" (nothing is stored yet); only the version gate can stop the second, and an equal version
    // is not newer.
    const seedSameVersion = (plan: string, receivedAt: number) =>
      seedReceipt({
        source: "demo",
        eventType: "account.plan_changed",
        version: 7,
        receivedAt,
        payload: planChange("acct_race_same_version", plan, 7),
      });
    const first = await seedSameVersion("plan_first", t0 - 2);
    const second = await seedSameVersion("plan_second", t0 - 1);
    const verdicts = await processBatch(env, [first, second], t0);

    expect(verdicts.get(first)).toEqual({ kind: "done", status: "processed" });
    expect(verdicts.get(second)).toEqual({ kind: "done", status: "stale" });
    expect(await receiptRow(second)).toMatchObject({ status: "stale", staleAgainstVersion: 7, attempts: 1 });
    expect(await account("acct_race_same_version")).toMatchObject({ plan: "plan_first", planVersion: 7 });
  });

  it("records stale against the newer version committed between the handler's plan and its commit", async () => {
    const t0 = Date.now();
    const v5 = await seedPlanChange("acct_race_between", 5);
    const v9 = await seedPlanChange("acct_race_between", 9);
    // v5's handler plans "apply" (nothing newer is stored yet)…
    const planned = await planNow(v5, t0);
    // …then v9 commits before v5's commit runs.
    expect(await processReceipt(env, v9, t0)).toEqual({ kind: "done", status: "processed" });

    const { decisions } = await commitAttempts(env, [planned]);
    expect(decisions.get(v5)).toMatchObject({ kind: "commit", result: { status: "stale", againstVersion: 9 } });
    expect(await receiptRow(v5)).toMatchObject({ status: "stale", staleAgainstVersion: 9, attempts: 1 });
    expect(await account("acct_race_between")).toMatchObject({ plan: "plan_v9", planVersion: 9 });
  });

  it("leaves the receipt waiting, never processed with nothing applied, when the consumer dies after its gate lost", async () => {
    const t0 = Date.now();
    const v3 = await seedPlanChange("acct_race_crash", 3);
    const v4 = await seedPlanChange("acct_race_crash", 4);
    const planned = await planNow(v3, t0);
    expect(await processReceipt(env, v4, t0)).toEqual({ kind: "done", status: "processed" });

    // The shared batch (processed + effect behind the gate) aborts as one; the connection is then lost before the
    // stale verdict's own batch.
    await expect(commitAttempts({ ...env, DB: d1LostAfter(1) }, [planned])).rejects.toThrow("Network connection lost");
    expect(await receiptRow(v3)).toMatchObject({ status: "pending", staleAgainstVersion: null, attempts: 0 });
    expect(await committedAt(v3)).toBeNull();
    expect(await account("acct_race_crash")).toMatchObject({ plan: "plan_v4", planVersion: 4 });

    // The queue's redelivery runs it again: stale against the version that won, in one commit.
    expect(await processReceipt(env, v3, t0 + 1)).toEqual({ kind: "done", status: "stale" });
    expect(await receiptRow(v3)).toMatchObject({ status: "stale", staleAgainstVersion: 4, attempts: 1 });
    expect(await account("acct_race_crash")).toMatchObject({ plan: "plan_v4", planVersion: 4 });
  });
});
