// Sender-chosen text printed by the CLI cannot drive the terminal: show's lines (and the printable() tail and echo
// print through) carry control characters and bidirectional overrides as visible escapes.
import assert from "node:assert/strict";
import { test } from "node:test";
import { describe } from "../../scripts/cli/commands/show.mjs";
import { printable } from "../../scripts/cli/format.mjs";

const CLEAR_SCREEN = "\u001b[2J";
const RETITLE = "\u001b]0;owned\u0007";
const RIGHT_TO_LEFT = "\u202e";

/** Any character a terminal would act on rather than show. */
const ACTIVE = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/;

test("show prints a key, type, subject, header, error and body holding terminal escapes as visible text", () => {
  /** @type {import("../../src/admin/receipts/receipt-detail").ReceiptDetail} */
  const detail = {
    receipt: {
      receiptId: "01JD0000000000000000000000",
      source: "demo",
      eventKey: `evt_${CLEAR_SCREEN}`,
      eventType: `invoice${RETITLE}.paid`,
      subjectId: `acct${RIGHT_TO_LEFT}gpj.exe`,
      version: null,
      status: "dead",
      provenance: "live",
      attempts: 1,
      attemptsSinceReplay: null,
      receivedToFinishedMs: null,
      receivedAt: 1_800_000_000_000,
      occurredAt: null,
      relayedAt: 1_800_000_000_050,
      processedAt: null,
      nextAttemptAt: null,
      lastError: `destination answered 500: ${CLEAR_SCREEN}`,
      staleAgainstVersion: null,
      leaseUntil: null,
      leaseGeneration: 1,
      committedAt: null,
      replayCount: 0,
      replayedAt: null,
      dismissedAt: null,
      restoredAt: null,
      route: null,
      filteredRoutes: null,
      payloadSha256: "0".repeat(64),
      bodyRetained: true,
      bodyLocation: null,
      bodyProblem: null,
      bodyDropsAt: null,
      keptHeaders: { "user-agent": `agent\r${CLEAR_SCREEN}` },
      body: { encoding: "utf8", text: `not json\n${CLEAR_SCREEN}${RIGHT_TO_LEFT}` },
    },
    attempts: [
      {
        attemptNumber: 1,
        outcome: "dead",
        httpStatus: 500,
        durationMs: 5,
        startedAt: 1_800_000_000_100,
        finishedAt: 1_800_000_000_105,
        error: `boom${RETITLE}`,
      },
    ],
    routes: [],
    summary: "dead",
    replays: [],
    quarantine: [],
  };
  const lines = describe(detail, true);
  for (const line of lines)
    assert.doesNotMatch(line, ACTIVE, `an active character reached the terminal in ${JSON.stringify(line)}`);
  const text = lines.join("\n");
  assert.ok(text.includes("evt_\\x1b[2J"), "the key is shown with its escape spelled out");
  assert.ok(text.includes("invoice\\x1b]0;owned\\x07.paid"));
  assert.ok(text.includes("acct\\u202egpj.exe"));
  assert.ok(text.includes("agent\\x0d\\x1b[2J"));
  // A body keeps its own line breaks: it is meant to span lines.
  assert.ok(text.includes("not json\n\\x1b[2J\\u202e"));
});

test("printable keeps ordinary text, tabs and (when asked) newlines as they are", () => {
  assert.equal(printable("order.paid — ünïcode ✓\tok"), "order.paid — ünïcode ✓\tok");
  assert.equal(printable("a\nb"), "a\\x0ab");
  assert.equal(printable("a\nb", { multiline: true }), "a\nb");
  assert.equal(printable(null), "");
});
