import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { ReplayFilterError, replayDeadReceipts, replayReceipt } from "../../src/replay/replay-receipts";
import {
  account,
  credit,
  deliverDemo,
  eventually,
  planChange,
  post,
  signDemo,
  waitForStatus,
} from "../support/deliveries";
import { attemptRows, receiptRow, seedReceipt, standinRequests } from "./support/processing";

async function receiptIdOf(source: string, eventKey: string): Promise<string> {
  const row = await env.DB.prepare("SELECT id FROM receipts WHERE source = ? AND event_key = ?")
    .bind(source, eventKey)
    .first<{ id: string }>();
  return row!.id;
}

/** Waits until the replayed run has recorded its attempt and settled. */
async function waitForAttempts(receiptId: string, count: number): Promise<void> {
  await eventually(
    async () => {
      const attempts = await attemptRows(receiptId);
      const { status } = await receiptRow(receiptId);
      return attempts.length === count &&
        attempts.every((attempt) => attempt.finishedAt !== null) &&
        !["pending", "processing"].includes(status)
        ? true
        : undefined;
    },
    15_000,
    `${receiptId} to settle after ${count} attempts`,
  );
}

describe("replaying one receipt through the normal path", () => {
  it("brings a dead receipt back once its destination is fixed, under the same idempotency key", async () => {
    const source = "proc-forward-fixed-later";
    const body = JSON.stringify({ type: "invoice.paid", data: { invoice: "in_1" } });
    expect((await post(`/webhooks/${source}`, body, signDemo("evt_fixed_later", body))).status).toBe(200);
    expect(await waitForStatus(source, "evt_fixed_later", ["dead"])).toBe("dead");
    const receiptId = await receiptIdOf(source, "evt_fixed_later");
    expect(await receiptRow(receiptId)).toMatchObject({
      lastError: "destination answered 404",
      hasBody: 1,
      provenance: "live",
    });

    expect(await replayReceipt(env, receiptId)).toEqual({ kind: "replayed", receiptId, previousStatus: "dead" });
    await waitForAttempts(receiptId, 2);
    expect(await receiptRow(receiptId)).toMatchObject({
      status: "processed",
      provenance: "live",
      replayCount: 1,
      lastError: null,
      attempts: 1,
    });
    expect(
      (await attemptRows(receiptId)).map((attempt) => [attempt.attemptNumber, attempt.outcome, attempt.httpStatus]),
    ).toEqual([
      [1, "dead", 404],
      [2, "processed", 204],
    ]);
    const calls = await standinRequests(receiptId);
    expect(calls.map((call) => call.answer)).toEqual([404, 204]);
    expect(calls.every((call) => call.headers["idempotency-key"] === receiptId && call.body === body)).toBe(true);

    // Replayed again now that it is processed: nothing is resent at all.
    expect((await replayReceipt(env, receiptId)).kind).toBe("replayed");
    await waitForAttempts(receiptId, 3);
    expect((await attemptRows(receiptId))[2]).toMatchObject({ outcome: "duplicate", httpStatus: null });
    expect((await receiptRow(receiptId)).status).toBe("processed");
    expect(await standinRequests(receiptId)).toHaveLength(2);
  });

  it("applies nothing when the receipt was already processed, and returns it to processed", async () => {
    await deliverDemo("msg_replay_processed", credit("acct_replay", 100));
    expect(await waitForStatus("demo", "msg_replay_processed")).toBe("processed");
    const receiptId = await receiptIdOf("demo", "msg_replay_processed");

    expect(await replayReceipt(env, receiptId)).toEqual({ kind: "replayed", receiptId, previousStatus: "processed" });
    await waitForAttempts(receiptId, 2);
    expect(await receiptRow(receiptId)).toMatchObject({ status: "processed", provenance: "live", replayCount: 1 });
    expect((await account("acct_replay"))?.credits).toBe(100);
    expect((await attemptRows(receiptId)).map((attempt) => attempt.outcome)).toEqual(["processed", "duplicate"]);

    // Twice more, concurrently: one of them resets it (the other finds it in flight, unless the first already
    // finished), and the account still holds one credit.
    const again = await Promise.all([replayReceipt(env, receiptId), replayReceipt(env, receiptId)]);
    const replayed = again.filter((result) => result.kind === "replayed").length;
    expect(replayed).toBeGreaterThanOrEqual(1);
    await waitForAttempts(receiptId, 2 + replayed);
    expect((await account("acct_replay"))?.credits).toBe(100);
  });

  it("returns a replayed stale receipt to stale, against the same version", async () => {
    await deliverDemo("msg_replay_v9", planChange("acct_replay_plan", "plan_v9", 9));
    expect(await waitForStatus("demo", "msg_replay_v9")).toBe("processed");
    await deliverDemo("msg_replay_v3", planChange("acct_replay_plan", "plan_v3", 3));
    expect(await waitForStatus("demo", "msg_replay_v3", ["stale"])).toBe("stale");
    const receiptId = await receiptIdOf("demo", "msg_replay_v3");

    expect((await replayReceipt(env, receiptId)).kind).toBe("replayed");
    await waitForAttempts(receiptId, 2);
    expect(await receiptRow(receiptId)).toMatchObject({
      status: "stale",
      staleAgainstVersion: 9,
      provenance: "live",
      replayCount: 1,
    });
    expect(await account("acct_replay_plan")).toMatchObject({ plan: "plan_v9", planVersion: 9 });
  });

  it("refuses what cannot be replayed, writing nothing", async () => {
    expect(await replayReceipt(env, "01NOSUCHRECEIPT00000000000")).toEqual({
      kind: "not_found",
      receiptId: "01NOSUCHRECEIPT00000000000",
    });
    const pending = await seedReceipt({ source: "proc-forward-ok", payload: {}, status: "pending" });
    expect(await replayReceipt(env, pending)).toEqual({ kind: "in_flight", receiptId: pending, status: "pending" });
    const expired = await seedReceipt({ source: "proc-forward-ok", payload: {}, status: "dead" });
    await env.DB.prepare("UPDATE receipts SET body = NULL WHERE id = ?").bind(expired).run();
    expect(await replayReceipt(env, expired)).toEqual({ kind: "payload_expired", receiptId: expired });
    expect(await receiptRow(expired)).toMatchObject({ status: "dead", provenance: "live" });
  });
});

describe("replaying dead receipts by filter", () => {
  it("replays only the dead receipts matching source, type and time range, and says when more remain", async () => {
    const base = Date.parse("2026-11-01T00:00:00Z");
    const hour = 3_600_000;
    const seed = (source: string, eventType: string, hours: number, status = "dead") =>
      seedReceipt({ source, eventType, payload: { type: eventType }, receivedAt: base + hours * hour, status });
    const matching = [
      await seed("proc-forward-ok", "a.one", 1),
      await seed("proc-forward-ok", "a.one", 2),
      await seed("proc-forward-ok", "a.one", 3),
    ];
    const untouched = [
      await seed("proc-forward-ok", "a.one", 30), // outside the range
      await seed("proc-forward-ok", "a.one", 24), // at the range's end, which is exclusive
      await seed("proc-forward-ok", "b.two", 2), // other type
      await seed("proc-forward-gone", "a.one", 2), // other source
      await seed("proc-forward-ok", "a.one", 2, "processed"), // not dead
    ];
    const filter = {
      source: "proc-forward-ok",
      eventType: "a.one",
      receivedFrom: base,
      receivedBefore: base + 24 * hour,
    };

    const firstPage = await replayDeadReceipts(env, { ...filter, limit: 2 });
    expect(firstPage).toEqual({ replayed: 2, receiptIds: matching.slice(0, 2), more: true, cursor: matching[1] });
    const secondPage = await replayDeadReceipts(env, { ...filter, limit: 2, after: firstPage.cursor! });
    expect(secondPage).toEqual({ replayed: 1, receiptIds: matching.slice(2), more: false, cursor: matching[2] });

    for (const receiptId of matching) {
      await waitForAttempts(receiptId, 1);
      expect(await receiptRow(receiptId)).toMatchObject({ status: "processed", provenance: "live", replayCount: 1 });
    }
    expect((await Promise.all(untouched.map(receiptRow))).map((row) => [row.status, row.provenance])).toEqual([
      ["dead", "live"],
      ["dead", "live"],
      ["dead", "live"],
      ["dead", "live"],
      ["processed", "live"],
    ]);
    expect(await replayDeadReceipts(env, filter)).toEqual({ replayed: 0, receiptIds: [], more: false, cursor: null });
  });

  it("rejects a filter that cannot be right, before touching anything", async () => {
    const dead = await seedReceipt({ source: "proc-forward-ok", payload: {}, status: "dead" });
    await expect(replayDeadReceipts(env, { limit: 0 })).rejects.toThrow(ReplayFilterError);
    await expect(replayDeadReceipts(env, { limit: 5000 })).rejects.toThrow(/limit must be an integer from 1 to 1000/);
    await expect(replayDeadReceipts(env, { receivedFrom: 10, receivedBefore: 5 })).rejects.toThrow(
      /receivedFrom must be earlier/,
    );
    await expect(replayDeadReceipts(env, { source: "" })).rejects.toThrow(/source must be a non-empty string/);
    await expect(replayDeadReceipts(env, { receivedFrom: Number.NaN })).rejects.toThrow(/epoch milliseconds/);
    expect((await receiptRow(dead)).status).toBe("dead");
  });
});
