import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { receiptRow, standinRequests } from "../consumers/support/processing";
import { account, eventually } from "../support/deliveries";
import { settleEachTest } from "../support/storage";
import { deliveryRow, sendCredit } from "./gate-support";

/**
 * One route's effect failing to commit on an event's first attempt (docs/processing.md, "Deliveries"): the docs' `crm`
 * (a forward) and `ledger` (the accounts handler) routes of one source, in either order
 * (test/fixtures/sources/fanout-abort.json), through the real route and the real queue. The ledger's effect meets a
 * D1 trigger that aborts its insert, the way a constraint would: the first attempt's commit batch aborts on it. The
 * forward stand-in's record (per Idempotency-Key `<receipt>:<route>`) is the evidence of what the CRM received. No
 * cron runs here, so a further delivery is attempted again only if a queue message was sent for it.
 */

settleEachTest();

/** A D1 trigger aborting every write of one account's row: the ledger's effect fails until it is removed. */
async function failEffectOn(accountId: string): Promise<() => Promise<void>> {
  const trigger = `failpoint_effect_${accountId.replace(/[^a-z0-9_]/gi, "_")}`;
  await env.DB.prepare(
    `CREATE TRIGGER ${trigger} BEFORE INSERT ON accounts WHEN NEW.id = '${accountId.replace(/'/g, "''")}'
     BEGIN SELECT RAISE(ABORT, 'injected failure in the ledger''s effect'); END`,
  ).run();
  return async () => {
    await env.DB.prepare(`DROP TRIGGER IF EXISTS ${trigger}`).run();
  };
}

const crmAnswers = async (receiptId: string) =>
  (await standinRequests(`${receiptId}:crm`)).map((request) => request.answer);

const newAccount = () => `acct_abort_${crypto.randomUUID().slice(0, 8)}`;

describe("a fan-out whose ledger effect fails to commit", { timeout: 60_000 }, () => {
  it("as a further route: sends the CRM once, commits it processed, and gives the ledger its own message at once", async () => {
    const accountId = newAccount();
    const removeFailpoint = await failEffectOn(accountId);
    try {
      const receiptId = await sendCredit("routing-fanout-abort", { account: accountId, amount: 7 });

      // The CRM's delivery went through and its own statements committed: processed on its first attempt, sent once.
      await eventually(
        async () => ((await receiptRow(receiptId)).status === "processed" ? true : undefined),
        15_000,
        "the receipt processed",
      );
      expect.soft(await receiptRow(receiptId)).toMatchObject({ status: "processed", attempts: 1, lastError: null });
      expect.soft(await crmAnswers(receiptId)).toEqual([204]);

      // The ledger's delivery was left to its own next attempt, and that attempt came on its own message (the only
      // way here: no cron runs), meeting the failpoint again: nothing applied, retried on its route's schedule.
      const attempted = await eventually(
        async () => {
          const row = await deliveryRow(receiptId, "ledger");
          return row && row.attempts > 0 ? row : undefined;
        },
        15_000,
        "the ledger's delivery to be attempted on its own message",
      );
      expect(attempted.status).toBe("pending");
      expect(await account(accountId)).toBeNull();

      // D1 takes the write again: the ledger's next attempt applies its effect, once; nothing else is sent again.
      await removeFailpoint();
      await eventually(
        async () => ((await deliveryRow(receiptId, "ledger"))?.status === "processed" ? true : undefined),
        15_000,
        "the ledger's delivery processed",
      );
      expect(await account(accountId)).toMatchObject({ credits: 7 });
      expect(await crmAnswers(receiptId)).toEqual([204]);
      expect(await receiptRow(receiptId)).toMatchObject({ status: "processed", attempts: 1 });
    } finally {
      await removeFailpoint();
    }
  });

  it("as the receipt's own route: retries the ledger alone, and the CRM's delivery stands processed, sent once", async () => {
    const accountId = newAccount();
    const removeFailpoint = await failEffectOn(accountId);
    try {
      const receiptId = await sendCredit("routing-fanout-abort-own", { account: accountId, amount: 7 });

      const failed = await eventually(
        async () => {
          const row = await receiptRow(receiptId);
          return row.attempts > 0 && row.status === "pending" ? row : undefined;
        },
        15_000,
        "the ledger's first attempt to fail",
      );
      expect(failed.lastError).toMatch(/^commit failed: /);
      expect(await deliveryRow(receiptId, "crm")).toMatchObject({ status: "processed", attempts: 1 });
      expect(await crmAnswers(receiptId)).toEqual([204]);

      await removeFailpoint();
      await eventually(
        async () => ((await receiptRow(receiptId)).status === "processed" ? true : undefined),
        15_000,
        "the ledger's delivery processed",
      );
      expect(await account(accountId)).toMatchObject({ credits: 7 });
      expect(await crmAnswers(receiptId)).toEqual([204]);
      expect(await deliveryRow(receiptId, "crm")).toMatchObject({ status: "processed", attempts: 1 });
    } finally {
      await removeFailpoint();
    }
  });
});
