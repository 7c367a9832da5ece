import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { processBatch, processReceipt } from "../../src/consumers/receipts/process";
import { account, deliverDemo, planChange, waitForStatus } from "../support/deliveries";
import { plannedOutcomes, testEnv } from "./support/handlers";
import { attemptRows, receiptRow, seedReceipt } from "./support/processing";

/** Runs events for one account through the version-ordered test handler, in the given order. */
async function runInOrder(
  events: { plan: string; version?: number; at?: number }[],
  accountId: string,
): Promise<string[]> {
  const receiptIds: string[] = [];
  for (const event of events) {
    const receiptId = await seedReceipt({ source: "proc-versioned", payload: { account: accountId, ...event } });
    await processReceipt(testEnv, receiptId);
    receiptIds.push(receiptId);
  }
  return receiptIds;
}

async function storedVersionOf(accountId: string): Promise<number | undefined> {
  const row = await env.DB.prepare(
    "SELECT version FROM object_versions WHERE source = 'proc-versioned' AND object_type = 'plan' AND object_id = ?",
  )
    .bind(accountId)
    .first<{ version: number }>();
  return row?.version;
}

describe("ordering by version", () => {
  it("applies newer versions and records an older one as stale against the version it lost to", async () => {
    const [v2, v1] = await runInOrder(
      [
        { plan: "plan_v2", version: 2 },
        { plan: "plan_v1", version: 1 },
      ],
      "acct_order_desc",
    );
    expect(await receiptRow(v2!)).toMatchObject({ status: "processed", staleAgainstVersion: null });
    expect(await receiptRow(v1!)).toMatchObject({ status: "stale", staleAgainstVersion: 2 });
    expect(await attemptRows(v1!)).toMatchObject([{ outcome: "stale", error: "stale against version 2" }]);
    expect(await account("acct_order_desc")).toMatchObject({ plan: "plan_v2", credits: 1 });

    await runInOrder(
      [
        { plan: "plan_v1", version: 1 },
        { plan: "plan_v2", version: 2 },
      ],
      "acct_order_asc",
    );
    expect(await account("acct_order_asc")).toMatchObject({ plan: "plan_v2", credits: 2 });
    expect(await storedVersionOf("acct_order_asc")).toBe(2);
  });

  it("treats an equal version as already applied", async () => {
    const [first, second] = await runInOrder(
      [
        { plan: "plan_a", version: 4 },
        { plan: "plan_b", version: 4 },
      ],
      "acct_order_equal",
    );
    expect((await receiptRow(first!)).status).toBe("processed");
    expect(await receiptRow(second!)).toMatchObject({ status: "stale", staleAgainstVersion: 4 });
    expect(await account("acct_order_equal")).toMatchObject({ plan: "plan_a", credits: 1 });
  });

  it("holds under a real race: the older event's batch rolls back whole when the newer one commits first", async () => {
    const accounts = Array.from({ length: 12 }, (_, index) => `acct_order_race_${index}`);
    const pairs = await Promise.all(
      accounts.map(async (accountId) => ({
        accountId,
        older: await seedReceipt({
          source: "proc-versioned",
          payload: { account: accountId, plan: "plan_v5", version: 5, pauseMs: 150 },
        }),
        newer: await seedReceipt({
          source: "proc-versioned",
          payload: { account: accountId, plan: "plan_v6", version: 6, pauseMs: 20 },
        }),
      })),
    );
    // Both events of a pair read "nothing stored" before either commits; the newer one commits first, so only the
    // batch-level claim can stop the older one.
    await Promise.all(
      pairs.flatMap(({ older, newer }) => [processReceipt(testEnv, older), processReceipt(testEnv, newer)]),
    );

    let racesLostByOlder = 0;
    for (const { accountId, older, newer } of pairs) {
      expect(await account(accountId)).toMatchObject({ plan: "plan_v6" });
      expect(await storedVersionOf(accountId)).toBe(6);
      expect((await receiptRow(newer)).status).toBe("processed");
      const olderRow = await receiptRow(older);
      // Either v5 committed first and v6 overwrote it, or v5 lost and applied nothing at all.
      if (olderRow.status === "stale") {
        if (plannedOutcomes.get(older) === "apply") racesLostByOlder++;
        expect(olderRow.staleAgainstVersion).toBe(6);
        expect((await account(accountId))!.credits).toBe(1);
      } else {
        expect(olderRow.status).toBe("processed");
        expect((await account(accountId))!.credits).toBe(2);
      }
    }
    expect(racesLostByOlder).toBeGreaterThan(0);
  });
});

describe("ordering by version, two different events with one version", () => {
  it("applies exactly one when both are planned before either commits: the gate treats equal as not newer", async () => {
    const accountId = "acct_order_same_version_race";
    const first = await seedReceipt({
      source: "proc-versioned",
      payload: { account: accountId, plan: "plan_first", version: 3 },
    });
    const second = await seedReceipt({
      source: "proc-versioned",
      payload: { account: accountId, plan: "plan_second", version: 3 },
    });
    // One batch: both handlers read "nothing stored" and plan to apply, so only the batch-level claim decides.
    const verdicts = await processBatch(testEnv, [first, second]);
    expect([plannedOutcomes.get(first), plannedOutcomes.get(second)]).toEqual(["apply", "apply"]);

    const rows = { [first]: await receiptRow(first), [second]: await receiptRow(second) };
    const winner = [first, second].find((receiptId) => rows[receiptId]!.status === "processed");
    const loser = winner === first ? second : first;
    expect(winner).toBeDefined();
    expect(verdicts.get(loser)).toEqual({ kind: "done", status: "stale" });
    expect(rows[loser]).toMatchObject({ status: "stale", staleAgainstVersion: 3 });
    expect(await account(accountId)).toMatchObject({
      plan: winner === first ? "plan_first" : "plan_second",
      credits: 1,
    });
    expect(await storedVersionOf(accountId)).toBe(3);
  });
});

describe("ordering by timestamp only", () => {
  const at = Date.parse("2026-11-30T09:00:00Z");

  it("applies a later timestamp and refuses an earlier one", async () => {
    await runInOrder(
      [
        { plan: "plan_early", at },
        { plan: "plan_late", at: at + 1000 },
      ],
      "acct_ts_asc",
    );
    expect(await account("acct_ts_asc")).toMatchObject({ plan: "plan_late", credits: 2 });
    const [, early] = await runInOrder(
      [
        { plan: "plan_late", at: at + 1000 },
        { plan: "plan_early", at },
      ],
      "acct_ts_desc",
    );
    expect(await receiptRow(early!)).toMatchObject({
      status: "stale",
      staleAgainstVersion: at + 1000,
      lastError: null,
    });
  });

  it("treats a tie as unknown, not newer: whichever arrives second is not applied, either way round", async () => {
    for (const [firstPlan, secondPlan] of [
      ["plan_x", "plan_y"],
      ["plan_y", "plan_x"],
    ] as const) {
      const accountId = `acct_tie_${firstPlan}_first`;
      const [first, second] = await runInOrder(
        [
          { plan: firstPlan, at },
          { plan: secondPlan, at },
        ],
        accountId,
      );
      expect(await account(accountId)).toMatchObject({ plan: firstPlan, credits: 1 });
      expect((await receiptRow(first!)).status).toBe("processed");
      const tied = await receiptRow(second!);
      expect(tied).toMatchObject({ status: "stale", staleAgainstVersion: at });
      expect(tied.lastError).toBe("order unknown: same timestamp as the stored state; not applied");
      expect((await attemptRows(second!))[0]!.error).toMatch(/order unknown/);
    }
  });
});

describe("the shipped accounts handler's own-row guard", () => {
  it("keeps plan_version monotonic through the real pipeline", async () => {
    await deliverDemo("msg_order_v7", planChange("acct_order_demo", "plan_v7", 7));
    expect(await waitForStatus("demo", "msg_order_v7")).toBe("processed");
    await deliverDemo("msg_order_v5", planChange("acct_order_demo", "plan_v5", 5));
    expect(await waitForStatus("demo", "msg_order_v5", ["stale"])).toBe("stale");
    expect(await account("acct_order_demo")).toMatchObject({ plan: "plan_v7", planVersion: 7 });
    const stale = await env.DB.prepare(
      "SELECT stale_against_version AS against FROM receipts WHERE source = 'demo' AND event_key = 'msg_order_v5'",
    ).first<{ against: number }>();
    expect(stale!.against).toBe(7);
  });
});
