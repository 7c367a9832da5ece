/**
 * `tail`'s feed in time order, against a stand-in admin API that answers a scripted story (a real receiver cannot
 * be made to show a replay between two of tail's looks on cue): a processed receipt is replayed, tail sees it
 * pending, then processed again while a newer receipt arrives. Each line carries the time the receipt says it
 * happened, and a look's lines print in that order whichever receipt they belong to.
 */
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { after, test } from "node:test";
import { clock } from "../../scripts/cli/format.mjs";
import { cliProcess, stopLeftoverCommands } from "./receiver.mjs";

// Noon on a fixed day: every time below is the same day, so the printed clocks compare as text.
const T0 = new Date(2026, 10, 30, 12, 0, 0).getTime();
const REPLAYED_AT = T0 + 20_000;
const SECOND_RUN = T0 + 25_000;
const OLDER = "01KB0000000000000000000001";
const NEWER = "01KB0000000000000000000002";

const summary = (/** @type {string} */ receiptId, /** @type {Record<string, unknown>} */ fields) => ({
  receiptId,
  source: "shop",
  eventKey: `key-${receiptId.slice(-1)}`,
  eventType: "order.paid",
  subjectId: null,
  version: null,
  occurredAt: null,
  provenance: "live",
  relayedAt: null,
  nextAttemptAt: null,
  lastError: null,
  payloadSha256: "0".repeat(64),
  bodyRetained: true,
  ...fields,
});
const attempt = (/** @type {number} */ attemptNumber, /** @type {number} */ startedAt) => ({
  attemptNumber,
  startedAt,
  finishedAt: startedAt + 100,
  outcome: "processed",
  httpStatus: null,
  error: null,
  durationMs: 100,
});
const firstRun = attempt(1, T0 + 50);
const replay = { replayNumber: 1, replayedAt: REPLAYED_AT, previousStatus: "processed", requestedBy: null };

/** What the API holds in each phase of the story: the newest receipts, and each one's detail. */
const PHASES = [
  {
    receipts: [
      summary(OLDER, { status: "processed", attempts: 1, replayCount: 0, receivedAt: T0, processedAt: T0 + 150 }),
    ],
    details: { [OLDER]: { receipt: { replayedAt: null }, attempts: [firstRun], replays: [] } },
  },
  {
    receipts: [
      summary(OLDER, { status: "pending", attempts: 0, replayCount: 1, receivedAt: T0, processedAt: T0 + 150 }),
    ],
    details: { [OLDER]: { receipt: { replayedAt: REPLAYED_AT }, attempts: [], replays: [replay] } },
  },
  {
    // The replay's run finishes after the newer receipt arrived: its lines come after that receipt's.
    receipts: [
      summary(NEWER, { status: "pending", attempts: 0, replayCount: 0, receivedAt: SECOND_RUN, processedAt: null }),
      summary(OLDER, {
        status: "processed",
        attempts: 1,
        replayCount: 1,
        receivedAt: T0,
        processedAt: SECOND_RUN + 1_100,
      }),
    ],
    details: {
      [OLDER]: {
        receipt: { replayedAt: REPLAYED_AT },
        attempts: [attempt(2, SECOND_RUN + 1_000)],
        replays: [replay],
      },
      [NEWER]: { receipt: { replayedAt: null }, attempts: [], replays: [] },
    },
  },
];
let phase = 0;

const api = createServer((request, response) => {
  const url = new URL(request.url ?? "/", "http://stand-in");
  const now = PHASES[phase];
  /** @type {unknown} */
  let answer = { error: { message: "not in the story" } };
  let code = 404;
  if (url.pathname === "/admin/api/receipts" && url.searchParams.has("changedSince")) {
    [answer, code] = [{ receipts: [], changesCursor: String(Date.now()), more: false }, 200];
  } else if (url.pathname === "/admin/api/receipts") {
    [answer, code] = [{ receipts: now.receipts, nextCursor: null, prevCursor: null }, 200];
  } else if (url.pathname.startsWith("/admin/api/receipts/")) {
    const detail = /** @type {Record<string, unknown>} */ (now.details)[url.pathname.split("/").at(-1) ?? ""];
    if (detail) [answer, code] = [detail, 200];
  } else if (url.pathname === "/admin/api/stats") {
    [answer, code] = [{ sources: [] }, 200];
  }
  response.writeHead(code, { "content-type": "application/json" });
  response.end(JSON.stringify(answer));
});

after(async () => {
  stopLeftoverCommands();
  await new Promise((done) => api.close(done));
});

test("tail stamps a replay's lines with the replay's own times and prints each look in time order", async () => {
  await new Promise((done) => api.listen(0, "127.0.0.1", () => done(undefined)));
  const port = /** @type {import("node:net").AddressInfo} */ (api.address()).port;
  const tail = cliProcess(["tail", "--source", "shop", "--history", "1", "--interval", "200"], {
    RECEIVER_URL: `http://127.0.0.1:${port}`,
    ADMIN_TOKEN: "stand-in-admin-token-for-tail",
  });
  await tail.waitFor(/following http:\/\/127\.0\.0\.1:\d+ · source shop/);
  assert.match(tail.output(), new RegExp(`^${clock(T0 + 50)}  shop  ${OLDER}  attempt 1 processed`, "m"));
  phase = 1;
  await tail.waitFor(new RegExp(`${OLDER}  pending$`, "m"));
  phase = 2;
  await tail.waitFor(new RegExp(`${OLDER}  processed$`, "m"));
  assert.equal(await tail.interrupt(), 0);

  const feed = tail
    .output()
    .split("\n")
    .filter((line) => /^\d\d:\d\d:\d\d\.\d{3} {2}shop/.test(line));
  // Put back to pending by the replay, at the replay's time (processed_at still holds the first run's end).
  assert.ok(feed.includes(`${clock(REPLAYED_AT)}  shop  ${OLDER}  replayed (was processed)`), feed.join("\n"));
  assert.ok(feed.includes(`${clock(REPLAYED_AT)}  shop  ${OLDER}  pending`), feed.join("\n"));
  // The replay's own attempt, and its finish at its own time.
  assert.ok(
    feed.some((line) => line.startsWith(`${clock(SECOND_RUN + 1_000)}  shop  ${OLDER}  attempt 2 processed`)),
    feed.join("\n"),
  );
  assert.ok(feed.includes(`${clock(SECOND_RUN + 1_100)}  shop  ${OLDER}  processed`), feed.join("\n"));
  // Time order throughout: the newer receipt's arrival comes before the replay's run that finished after it.
  const times = feed.map((line) => line.slice(0, 12));
  assert.deepEqual(times, [...times].sort(), feed.join("\n"));
});
