import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { receiptDetail } from "../../src/admin/receipts/receipt-detail";
import { database } from "../../src/db/client";
import { account, credit, deliverDemo, planChange, waitForStatus } from "../support/deliveries";
import { processedCount, settle, settleEachTest } from "../support/storage";

type Answer = { status: string; receipt: string };

async function receiptRow(eventKey: string) {
  return env.DB.prepare(
    "SELECT status, stale_against_version AS staleAgainstVersion, attempts FROM receipts WHERE source = 'demo' AND event_key = ?",
  )
    .bind(eventKey)
    .first<{ status: string; staleAgainstVersion: number | null; attempts: number }>();
}

settleEachTest();

describe("order by version, never by arrival", () => {
  it("keeps the newer plan when a stale version arrives after it, and records the stale one as 'stale'", async () => {
    expect(
      (await (await deliverDemo("msg_plan_v7", planChange("acct_plan", "plan_v7", 7))).json<Answer>()).status,
    ).toBe("accepted");
    expect(await waitForStatus("demo", "msg_plan_v7")).toBe("processed");
    expect(
      (await (await deliverDemo("msg_plan_v5", planChange("acct_plan", "plan_v5", 5))).json<Answer>()).status,
    ).toBe("accepted");
    expect(await waitForStatus("demo", "msg_plan_v5", ["stale", "processed"])).toBe("stale");

    expect(await account("acct_plan")).toMatchObject({ plan: "plan_v7", planVersion: 7 });
    expect(await receiptRow("msg_plan_v5")).toEqual({ status: "stale", staleAgainstVersion: 7, attempts: 1 });
    // A stale event is still finished business: its processed-key is recorded, so a redelivery changes nothing.
    expect(await processedCount("demo", "msg_plan_v5")).toBe(1);
  });

  it("treats an equal version from another event as not newer", async () => {
    await deliverDemo("msg_plan_tie_a", planChange("acct_plan_tie", "plan_a", 3));
    await waitForStatus("demo", "msg_plan_tie_a");
    await deliverDemo("msg_plan_tie_b", planChange("acct_plan_tie", "plan_b", 3));
    expect(await waitForStatus("demo", "msg_plan_tie_b", ["stale", "processed"])).toBe("stale");
    expect(await account("acct_plan_tie")).toMatchObject({ plan: "plan_a", planVersion: 3 });
  });

  it("converges on the newest version whatever the arrival order, when all arrive at once", async () => {
    const versions = [4, 9, 1, 6, 2, 8, 3, 7, 5];
    await Promise.all(
      versions.map((version) =>
        deliverDemo(`msg_plan_burst_${version}`, planChange("acct_plan_burst", `plan_v${version}`, version)),
      ),
    );
    await settle();
    expect(await account("acct_plan_burst")).toMatchObject({ plan: "plan_v9", planVersion: 9 });
    expect((await receiptRow("msg_plan_burst_9"))?.status).toBe("processed");
    for (const version of versions) {
      expect(["processed", "stale"]).toContain((await receiptRow(`msg_plan_burst_${version}`))?.status);
    }
  });

  it("does not let a plan change touch credits, nor a credit touch the plan", async () => {
    await deliverDemo("msg_mixed_plan", planChange("acct_mixed", "plan_v2", 2));
    await deliverDemo("msg_mixed_credit", credit("acct_mixed", 11));
    await settle();
    expect(await account("acct_mixed")).toMatchObject({ credits: 11, plan: "plan_v2", planVersion: 2 });
  });
});

describe("authentic events the handler does not act on", () => {
  it("records an authentic event of an unknown type as 'skipped' with no effect", async () => {
    const answer = await (
      await deliverDemo("msg_unknown_type", { type: "account.deleted", data: { account: "acct_unknown_type" } })
    ).json<Answer>();
    expect(answer.status).toBe("accepted");
    expect(await waitForStatus("demo", "msg_unknown_type", ["skipped", "processed", "dead"])).toBe("skipped");
    expect(await account("acct_unknown_type")).toBeNull();
    // Skipped is a normal outcome: no attempt row, the receipt keeps the attempt and its reason.
    expect(
      await env.DB.prepare("SELECT COUNT(*) AS count FROM attempts WHERE receipt_id = ?")
        .bind(answer.receipt)
        .first<number>("count"),
    ).toBe(0);
    const detail = await receiptDetail(database(env), answer.receipt);
    expect(detail?.attempts).toMatchObject([
      { outcome: "skipped", error: 'no accounts handler for type "account.deleted"' },
    ]);
    expect(detail?.receipt.lastError).toBe('no accounts handler for type "account.deleted"');
  });

  it("records an authentic body that is not JSON as 'skipped', not as a failure", async () => {
    const answer = await (await deliverDemo("msg_not_json", "this is not json")).json<Answer>();
    expect(answer.status).toBe("accepted");
    expect(await waitForStatus("demo", "msg_not_json", ["skipped", "processed", "dead"])).toBe("skipped");
  });

  it("sends an authentic event with an invalid payload straight to dead, visible with its error", async () => {
    await deliverDemo("msg_bad_amount", {
      type: "account.credited",
      data: { account: "acct_bad_amount", amount: "lots" },
    });
    expect(await waitForStatus("demo", "msg_bad_amount", ["dead", "processed", "skipped"])).toBe("dead");
    const row = await env.DB.prepare(
      "SELECT last_error AS lastError, attempts FROM receipts WHERE event_key = 'msg_bad_amount'",
    ).first<{
      lastError: string;
      attempts: number;
    }>();
    expect(row).toEqual({ lastError: expect.stringContaining("amount"), attempts: 1 });
    expect(await account("acct_bad_amount")).toBeNull();

    // A number that is not a whole one is just as invalid: credits are counted in whole units.
    await deliverDemo("msg_fractional_amount", {
      type: "account.credited",
      data: { account: "acct_fractional_amount", amount: 2.5 },
    });
    expect(await waitForStatus("demo", "msg_fractional_amount", ["dead", "processed", "skipped"])).toBe("dead");
    expect(await account("acct_fractional_amount")).toBeNull();
  });
});
