import { describe, expect, it } from "vitest";
import { adminPost } from "../admin/support";
import { attemptRows, receiptRow, seedReceipt } from "../consumers/support/processing";
import { eventually } from "../support/deliveries";

/**
 * A bulk replay of dead letters that fail again at once: proc-forward-gone forwards to a destination that always
 * answers 404, a permanent failure, so each replayed receipt is dead again within moments. Paging on by the
 * cursor must still visit each matching dead letter once, and reach the newer ones.
 */
interface BulkReplay {
  replayed: number;
  more: boolean;
  cursor: string | null;
  results: { receiptId: string; outcome: string }[];
}

async function deadAgain(receiptId: string): Promise<void> {
  await eventually(
    async () => {
      const row = await receiptRow(receiptId);
      return row.status === "dead" && row.replayCount === 1 && (await attemptRows(receiptId)).length >= 1
        ? true
        : undefined;
    },
    15_000,
    `${receiptId} to be dead again after its replay`,
  );
}

describe("bulk replay by filter, page by page", () => {
  it("visits each matching dead letter once, even when the replayed ones are dead again before the next page", async () => {
    const slice = Date.parse("2025-05-01T00:00:00Z") + Math.floor(Math.random() * 1e9);
    const eventType = `bulk.cursor.${slice}`;
    const dead: string[] = [];
    for (let index = 0; index < 5; index += 1) {
      dead.push(
        await seedReceipt({
          source: "proc-forward-gone",
          eventType,
          payload: { index },
          receivedAt: slice + index,
          status: "dead",
        }),
      );
    }
    const filter = {
      source: "proc-forward-gone",
      type: eventType,
      since: slice,
      until: new Date(slice + 10).toISOString(),
      limit: 2,
    };

    const replayedIds: string[] = [];
    let after: string | undefined;
    for (let page = 0; page < 5; page += 1) {
      const response = await adminPost("/admin/api/dead/replay", after === undefined ? filter : { ...filter, after });
      expect(response.status).toBe(200);
      const report = await response.json<BulkReplay>();
      const ids = report.results.map((result) => result.receiptId);
      replayedIds.push(...ids);
      // The replayed ones fail again at once, and are dead letters matching the filter when the next page is asked for.
      for (const receiptId of ids) await deadAgain(receiptId);
      if (!report.more) break;
      expect(report.cursor).toBe(ids.at(-1));
      after = report.cursor!;
    }
    expect(replayedIds).toEqual(dead);
    for (const receiptId of dead) expect((await receiptRow(receiptId)).replayCount).toBe(1);
  });

  it("refuses an after that is not a cursor", async () => {
    const response = await adminPost("/admin/api/dead/replay", { source: "proc-forward-gone", after: "not-a-cursor" });
    expect(response.status).toBe(400);
    expect((await response.json<{ error: { message: string } }>()).error.message).toContain(
      '"after" must be the "cursor"',
    );
  });
});
