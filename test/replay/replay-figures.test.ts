import { env } from "cloudflare:workers";
import { eq } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import type { SourceStats } from "../../src/admin/stats/stats";
import { database } from "../../src/db/client";
import { receipts } from "../../src/db/schema";
import { adminGet, adminPost, dashboardPage, dashboardSession, seedReceipt } from "../admin/support";
import { eventually } from "../support/deliveries";

/**
 * A replayed receipt's figures, one definition everywhere (src/db/receipt-runs.ts; issue 37): its
 * attempts are every attempt ever (not the run's retry budget, which the replay reset), "since the last replay" is
 * a second figure, and received → finished is the first run's, not the replay's. Read through the admin API's
 * receipts list, receipt detail and stats, and the dashboard's list, receipt page and overview.
 *
 * The receipt: received a minute ago, first run skipped after 4 s (one attempt), replayed through the admin API to
 * a destination that answers 2xx, so the replayed run processes it with its own attempt, far later than 4 s.
 */

const SOURCE = "proc-forward-ok";
const FIRST_RUN_MS = 4000;

async function replayedReceipt(): Promise<{ receiptId: string; receivedAt: number }> {
  const receivedAt = Date.now() - 60_000;
  const receiptId = await seedReceipt({
    source: SOURCE,
    receivedAt,
    relayedAt: receivedAt,
    status: "skipped",
    lastError: "no route matched",
    body: Buffer.from("{}"),
    attempts: 1,
    leaseGeneration: 1,
    attemptStartedAt: receivedAt + 1000,
    attemptDurationMs: FIRST_RUN_MS - 1000,
    processedAt: receivedAt + FIRST_RUN_MS,
  });
  const replay = await adminPost(`/admin/api/receipts/${receiptId}/replay`, {});
  expect(replay.status).toBe(202);
  await eventually(
    async () => {
      const [row] = await database(env)
        .select({ status: receipts.status })
        .from(receipts)
        .where(eq(receipts.receiptId, receiptId));
      return row?.status === "processed" ? row.status : undefined;
    },
    15_000,
    `${receiptId} to be processed by its replay`,
  );
  return { receiptId, receivedAt };
}

describe("a replayed receipt's attempts and received → finished", () => {
  it("are the same in the admin API's list, detail and stats, and on the dashboard's pages", async () => {
    const { receiptId } = await replayedReceipt();

    const list = await adminGet(`/admin/api/receipts?source=${SOURCE}`);
    const listed = (await list.json<{ receipts: { receiptId: string; attempts: number }[] }>()).receipts;
    expect(listed.find((receipt) => receipt.receiptId === receiptId)?.attempts).toBe(2);

    const detail = await (await adminGet(`/admin/api/receipts/${receiptId}`)).json<{
      receipt: { attempts: number; attemptsSinceReplay: number | null; receivedToFinishedMs: number | null };
      attempts: { attemptNumber: number }[];
      replays: { replayedAt: number; finishedAt: number | null; durationMs: number | null }[];
    }>();
    expect(detail.receipt).toMatchObject({ attempts: 2, attemptsSinceReplay: 1, receivedToFinishedMs: FIRST_RUN_MS });
    expect(detail.attempts.map((attempt) => attempt.attemptNumber)).toEqual([1, 2]);
    // The replay's run is reported as its own: from the replay to its finish.
    const [replay] = detail.replays;
    expect(replay!.finishedAt).not.toBeNull();
    expect(replay!.durationMs).toBe(replay!.finishedAt! - replay!.replayedAt);

    const stats = await adminGet(`/admin/api/stats?source=${SOURCE}&window=24h`);
    const [sourceStats] = (await stats.json<{ sources: SourceStats[] }>()).sources;
    expect(sourceStats!.processingLatencyMs).toMatchObject({ samples: 1, p50: FIRST_RUN_MS, p99: FIRST_RUN_MS });

    const cookie = await dashboardSession();
    const page = await (await dashboardPage(`/admin/receipts/${receiptId}`, { headers: { cookie } })).text();
    expect(page).toContain('<dd id="attempts">2 (1 since the last replay)</dd>');
    expect(page).toContain('<dd id="received-to-finished">4.0 s</dd>');
    const listPage = await (await dashboardPage(`/admin/receipts?source=${SOURCE}`, { headers: { cookie } })).text();
    const row = listPage.slice(listPage.indexOf(`/admin/receipts/${receiptId}`));
    expect(row.match(/data-label="Attempts" class="num">(\d+)</)?.[1]).toBe("2");
    const overview = await (await dashboardPage("/admin", { headers: { cookie } })).text();
    const sourceRow = overview.slice(overview.indexOf(`/admin/sources/${SOURCE}`));
    expect(sourceRow.match(/data-label="Received → finished">([^<]*)</)?.[1]).toBe("4.0 s / 4.0 s / 4.0 s");
  });
});
