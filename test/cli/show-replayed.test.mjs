// `show` prints a replayed receipt's figures as the admin API defines them (src/db/receipt-runs.ts; issue 37):
// every attempt ever with "since the last replay" beside it, and received → finished as the first run's, the
// replay's own run beside its replay, not folded into the first.
import assert from "node:assert/strict";
import { test } from "node:test";
import { describe } from "../../scripts/cli/commands/show.mjs";

const RECEIVED = 1_800_000_000_000;
const REPLAYED = RECEIVED + 20_000;

test("show: attempts ever with those since the replay, the first run's received → finished, the replay's own run", () => {
  /** @type {import("../../src/admin/receipts/receipt-detail").ReceiptDetail} */
  const detail = {
    receipt: {
      receiptId: "01JD0000000000000000000000",
      source: "demo",
      eventKey: "evt_1",
      eventType: "invoice.paid",
      subjectId: null,
      version: null,
      status: "processed",
      provenance: "live",
      attempts: 2,
      attemptsSinceReplay: 1,
      receivedToFinishedMs: 4000,
      receivedAt: RECEIVED,
      occurredAt: null,
      relayedAt: RECEIVED + 50,
      processedAt: REPLAYED + 1000,
      nextAttemptAt: null,
      lastError: null,
      staleAgainstVersion: null,
      leaseUntil: null,
      leaseGeneration: 2,
      committedAt: REPLAYED + 1000,
      replayCount: 1,
      replayedAt: REPLAYED,
      dismissedAt: null,
      restoredAt: null,
      route: null,
      filteredRoutes: null,
      payloadSha256: "0".repeat(64),
      bodyRetained: true,
      bodyLocation: null,
      bodyProblem: null,
      bodyDropsAt: null,
      keptHeaders: null,
      body: null,
    },
    attempts: [
      {
        attemptNumber: 1,
        outcome: "skipped",
        httpStatus: null,
        durationMs: 3000,
        startedAt: RECEIVED + 1000,
        finishedAt: RECEIVED + 4000,
        error: "no route matched",
      },
      {
        attemptNumber: 2,
        outcome: "processed",
        httpStatus: 200,
        durationMs: 900,
        startedAt: REPLAYED + 100,
        finishedAt: REPLAYED + 1000,
        error: null,
      },
    ],
    routes: [],
    summary: "processed",
    replays: [
      {
        replayNumber: 1,
        replayedAt: REPLAYED,
        previousStatus: "skipped",
        requestedBy: "api",
        finishedAt: REPLAYED + 1000,
        durationMs: 1000,
      },
    ],
    quarantine: [],
  };
  const text = describe(detail, false).join("\n");
  assert.ok(text.includes("attempts 2 (1 since the last replay)"), text);
  assert.ok(text.includes("replay 1 of 1: queued again (was skipped, via api), finished in 1.00 s"), text);
  assert.ok(text.includes("received → finished in 4.00 s (08:00:00.000 → 08:00:04.000)"), text);
});
