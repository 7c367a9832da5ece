import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { difference } from "../../src/lib/meter";
import { credit, deliverDemo, post, signDemo } from "../support/deliveries";
import { deliverGithub } from "../support/github";
import { meterTotals } from "../support/meters";
import { lateRelays, settle, settleEachTest } from "../support/storage";

/**
 * The happy path's billed writes per event, read from the runtime's own meters (D1 meta.rows_written, Durable
 * Object cursors' rowsWritten) while real deliveries go through the real route, shard, relay, queue and
 * consumer. Row counts are deterministic; timings and batching are not, so only rows are held here (the bench
 * reports the rest, `npm run bench -- --only meters`).
 */

const EVENTS = 40;
/** The budget per event (docs/performance.md): D1 rows in the receiver's own tables, and Durable Object rows. */
const D1_RECEIVER_ROWS_PER_EVENT = 3;
const DO_ROWS_PER_EVENT = 3;

settleEachTest();

/**
 * How long 40 events may take to settle, generous on purpose: a loaded machine has taken close to 30 s, and the
 * test holds row counts, never speed. A quiet run settles in seconds and never waits this out.
 */
const SETTLE_DEADLINE_MS = 180_000;

describe("the happy path's budget of billed rows", { timeout: SETTLE_DEADLINE_MS + 60_000 }, () => {
  it(`accepts and processes ${EVENTS} events writing ${D1_RECEIVER_ROWS_PER_EVENT} D1 rows each (a late relay one more) and at most ${DO_ROWS_PER_EVENT} Durable Object rows`, async () => {
    await settle();
    const before = await meterTotals("demo");
    const answers = await Promise.all(
      Array.from({ length: EVENTS }, (_, index) =>
        deliverDemo(`msg_budget_${index}`, credit(`acct_budget_${index % 7}`, 1)),
      ),
    );
    expect(answers.map((answer) => answer.status)).toEqual(Array(EVENTS).fill(200));
    await settle(SETTLE_DEADLINE_MS);
    const spent = difference(await meterTotals("demo"), before);

    const receiverRows = spent.d1RowsWritten - spent.d1HandlerRowsWritten;
    // The handler's own effect (the accounts upserts) is metered apart and not part of the budget, but it ran.
    expect(spent.d1HandlerRowsWritten).toBeGreaterThanOrEqual(EVENTS);
    expect(receiverRows).toBe(
      D1_RECEIVER_ROWS_PER_EVENT * EVENTS + (await lateRelays("event_key LIKE 'msg_budget_%'")),
    );
    // Alarm writes are billed as rows and included; there is at most one per shard per relay batch.
    expect(spent.doRowsWritten / EVENTS).toBeLessThanOrEqual(DO_ROWS_PER_EVENT);
    expect(spent.doRowsWritten - spent.doAlarmWrites).toBe(2 * EVENTS);
    expect(spent.doRequests).toBeGreaterThanOrEqual(EVENTS);
    expect(spent.queueOperations).toBeGreaterThan(0);

    const { results } = await env.DB.prepare(
      "SELECT status, COUNT(*) AS n FROM receipts WHERE event_key LIKE 'msg_budget_%' GROUP BY status",
    ).all();
    expect(results).toEqual([{ status: "processed", n: EVENTS }]);
  });

  // GitHub does not sign X-GitHub-Delivery: its claims are keyed by the payload hash (src/model/claims.ts), in the
  // same table and at the same price as a signed key — no extra row, no extra index.
  it(`keeps an unsigned-key source (GitHub) to the same ${DO_ROWS_PER_EVENT} Durable Object and ${D1_RECEIVER_ROWS_PER_EVENT} D1 rows`, async () => {
    await settle();
    const before = await meterTotals("uk-github-budget");
    const answers = await Promise.all(
      Array.from({ length: EVENTS }, (_, index) =>
        deliverGithub(
          "uk-github-budget",
          `gh_budget_${index}`,
          JSON.stringify({ ...credit(`acct_gh_budget_${index % 7}`, 1), delivery: index }),
        ),
      ),
    );
    expect(answers.map((answer) => answer.status)).toEqual(Array(EVENTS).fill(200));
    await settle(SETTLE_DEADLINE_MS);
    const spent = difference(await meterTotals("uk-github-budget"), before);

    expect(spent.d1HandlerRowsWritten).toBeGreaterThanOrEqual(EVENTS);
    expect(spent.d1RowsWritten - spent.d1HandlerRowsWritten).toBe(
      D1_RECEIVER_ROWS_PER_EVENT * EVENTS + (await lateRelays("source = 'uk-github-budget'")),
    );
    expect(spent.doRowsWritten / EVENTS).toBeLessThanOrEqual(DO_ROWS_PER_EVENT);
    expect(spent.doRowsWritten - spent.doAlarmWrites).toBe(2 * EVENTS);

    const { results } = await env.DB.prepare(
      "SELECT status, COUNT(*) AS n FROM receipts WHERE source = 'uk-github-budget' GROUP BY status",
    ).all();
    expect(results).toEqual([{ status: "processed", n: EVENTS }]);
  });

  // A forward reaches outside D1, so only a lease holder may send it; the relay's own message grants each receipt's
  // first lease (src/consumers/lease/relay-grant.ts), so the first attempt writes no lease row: the receipt and its
  // key entry at relay, the commit (3, as a handler's), where taking the lease in the consumer wrote a fourth.
  it(`keeps a forwarding source to the same ${D1_RECEIVER_ROWS_PER_EVENT} D1 rows: its first attempt writes no lease row`, async () => {
    await settle();
    const before = await meterTotals("proc-forward-ok");
    const answers = await Promise.all(
      Array.from({ length: EVENTS }, (_, index) => {
        const body = JSON.stringify(credit(`acct_fwd_budget_${index % 7}`, 1));
        return post("/webhooks/proc-forward-ok", body, signDemo(`msg_fwd_budget_${index}`, body));
      }),
    );
    expect(answers.map((answer) => answer.status)).toEqual(Array(EVENTS).fill(200));
    await settle(SETTLE_DEADLINE_MS);
    const spent = difference(await meterTotals("proc-forward-ok"), before);

    expect(spent.d1RowsWritten - spent.d1HandlerRowsWritten).toBe(
      D1_RECEIVER_ROWS_PER_EVENT * EVENTS + (await lateRelays("source = 'proc-forward-ok'")),
    );
    expect(spent.doRowsWritten - spent.doAlarmWrites).toBe(2 * EVENTS);
    const { results } = await env.DB.prepare(
      "SELECT status, attempts, lease_generation AS generation, COUNT(*) AS n FROM receipts WHERE source = 'proc-forward-ok' AND event_key LIKE 'msg_fwd_budget_%' GROUP BY 1, 2, 3",
    ).all();
    // Its one attempt counted, at the generation the relay granted.
    expect(results).toEqual([{ status: "processed", attempts: 1, generation: 1, n: EVENTS }]);
  });
});
