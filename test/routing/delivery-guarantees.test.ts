import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { pauseRoute, resumeRoute } from "../../src/admin/actions/route-control";
import { ATTEMPTS_IN_FLIGHT } from "../../src/consumers/attempt/slice-budget";
import { processDeliveries } from "../../src/consumers/deliveries/deliveries";
import { processBatch } from "../../src/consumers/receipts/process";
import type { QueuedWork } from "../../src/model/work-message";
import { OVERDUE_GRACE_MS } from "../../src/reconcile/redrive";
import { requeueUnfinished } from "../../src/reconcile/restart-requeue";
import { envWithSources, seedFurtherDelivery, seedReceipt, standinOrigin } from "../consumers/support/processing";
import { CRON_TEST_TIMEOUT_MS, runCron } from "../reconcile/support";
import { lane, recordingQueue } from "./gate-support";

/**
 * One delivery model (docs/processing.md, "Deliveries"): every guarantee written for the receipt's own delivery holds
 * for a further delivery too. Each case runs once per home — the receipt row (route `ledger` of routing-fanout) and a
 * `deliveries` row (route `audit`) — through the real consumer and the real cron, so a divergence shows.
 * routing-fanout allows 2 retries: 3 attempts in all.
 */

interface DeliveryState {
  status: string;
  attempts: number;
  leaseGeneration: number;
  leaseUntil: number | null;
  nextAttemptAt: number | null;
  lastError: string | null;
}

interface Home {
  name: string;
  seed(state: Omit<DeliveryState, "lastError">): Promise<string>;
  read(receiptId: string): Promise<DeliveryState>;
  /** The consumer's slice for this home, as queue.ts calls it. */
  process(receiptIds: string[], now: number, invocationEndsBy: number): Promise<unknown>;
}

const COLUMNS = `status, attempts, lease_generation AS leaseGeneration, lease_until AS leaseUntil,
  next_attempt_at AS nextAttemptAt, last_error AS lastError`;

async function seedEvent(status: string): Promise<string> {
  const receiptId = await seedReceipt({
    source: "routing-fanout",
    payload: { type: "account.credited", data: { account: "acct_guarantees", amount: 1 } },
    eventType: "account.credited",
    status,
  });
  await env.DB.prepare("UPDATE receipts SET route = 'ledger', filtered_routes = '' WHERE id = ?").bind(receiptId).run();
  return receiptId;
}

const homes: Home[] = [
  {
    name: "the receipt's own delivery",
    async seed(state) {
      const receiptId = await seedEvent(state.status);
      await env.DB.prepare(
        "UPDATE receipts SET attempts = ?, lease_generation = ?, lease_until = ?, next_attempt_at = ? WHERE id = ?",
      )
        .bind(state.attempts, state.leaseGeneration, state.leaseUntil, state.nextAttemptAt, receiptId)
        .run();
      return receiptId;
    },
    read: async (receiptId) =>
      (await env.DB.prepare(`SELECT ${COLUMNS} FROM receipts WHERE id = ?`).bind(receiptId).first<DeliveryState>())!,
    process: (receiptIds, now, invocationEndsBy) => processBatch(env, receiptIds, now, invocationEndsBy),
  },
  {
    name: "a further delivery",
    async seed(state) {
      const receiptId = await seedEvent("processed");
      await env.DB.prepare(
        `INSERT INTO deliveries (receipt_id, route, status, attempts, lease_generation, lease_until, next_attempt_at)
         VALUES (?, 'audit', ?, ?, ?, ?, ?)`,
      )
        .bind(receiptId, state.status, state.attempts, state.leaseGeneration, state.leaseUntil, state.nextAttemptAt)
        .run();
      return receiptId;
    },
    read: async (receiptId) =>
      (await env.DB.prepare(`SELECT ${COLUMNS} FROM deliveries WHERE receipt_id = ? AND route = 'audit'`)
        .bind(receiptId)
        .first<DeliveryState>())!,
    process: (receiptIds, now, invocationEndsBy) => processDeliveries(env, "audit", receiptIds, now, invocationEndsBy),
  },
];

const naming = (sent: QueuedWork[], receiptId: string) =>
  sent.filter((message) => "receiptIds" in message && message.receiptIds.includes(receiptId));

describe.each(homes)("$name", (home) => {
  it(
    "is dead-lettered by the cron once an abandoned lease spent its retries, and handed back re-driven while retries are left",
    async () => {
      const now = Date.now();
      const abandoned = {
        status: "processing",
        leaseUntil: now - 1000,
        nextAttemptAt: now - OVERDUE_GRACE_MS - 60_000,
      };
      const spent = await home.seed({ ...abandoned, attempts: 5, leaseGeneration: 5 });
      const left = await home.seed({ ...abandoned, attempts: 1, leaseGeneration: 1 });
      const sent: QueuedWork[] = [];
      await runCron(now, { ...env, WORK_QUEUE: recordingQueue(sent) });

      const spentRow = await home.read(spent);
      expect(spentRow).toMatchObject({ status: "dead", attempts: 5, leaseUntil: null, nextAttemptAt: null });
      expect(spentRow.lastError).toMatch(/^gave up after 5 attempts: lease expired before the attempt finished/);
      expect(naming(sent, spent)).toEqual([]);

      expect(await home.read(left)).toMatchObject({ status: "pending", attempts: 1, leaseUntil: null });
      // Re-driven: its next run is leased (counted) even where it would not need a lease, so a poison cannot loop.
      expect(naming(sent, left)).toEqual([expect.objectContaining({ redriven: true })]);
    },
    CRON_TEST_TIMEOUT_MS,
  );

  it("an attempt out of time gives back its lease and its count: it never ran, so it is never abandoned", async () => {
    const now = Date.now();
    // Its last attempt's lease ran out: this run takes it over (counted), but has no time left to start.
    const receiptId = await home.seed({
      status: "processing",
      attempts: 1,
      leaseGeneration: 1,
      leaseUntil: now - 1000,
      nextAttemptAt: now - 5000,
    });
    const verdicts = (await home.process([receiptId], now, now + 1000)) as Map<string, unknown>;
    expect(verdicts.get(receiptId)).toEqual({ kind: "retry", delaySeconds: 0, notStarted: true });
    expect(await home.read(receiptId)).toMatchObject({ status: "pending", attempts: 1, leaseUntil: null });
  });
});

/** A source whose route `held` is pausable, as its own route (one-route) or as a further one behind `plain`. */
const pausable = { name: "held", destination: "http://127.0.0.1:8793/lane/guarantees-held/ok", paused: false };
const pausableEnv = envWithSources({
  "guarantees-paused-own": { provider: "standard-webhooks", secrets: ["DEMO_WEBHOOK_SECRET"], routes: [pausable] },
  "guarantees-paused-further": {
    provider: "standard-webhooks",
    secrets: ["DEMO_WEBHOOK_SECRET"],
    routes: [{ name: "plain", destination: "none" }, pausable],
  },
});

const pausedHomes = [
  {
    name: "the receipt's own delivery",
    source: "guarantees-paused-own",
    async seed() {
      return seedReceipt({ source: "guarantees-paused-own", payload: { type: "x" } });
    },
    hold: (receiptId: string) => processBatch(pausableEnv, [receiptId], Date.now()),
    read: async (receiptId: string) =>
      (await env.DB.prepare(`SELECT ${COLUMNS} FROM receipts WHERE id = ?`).bind(receiptId).first<DeliveryState>())!,
  },
  {
    name: "a further delivery",
    source: "guarantees-paused-further",
    seed: () =>
      seedFurtherDelivery({
        source: "guarantees-paused-further",
        payload: { type: "x" },
        ownRoute: "plain",
        route: "held",
        nextAttemptAt: Date.now(),
      }),
    hold: (receiptId: string) => processDeliveries(pausableEnv, "held", [receiptId], Date.now()),
    read: async (receiptId: string) =>
      (await env.DB.prepare(`SELECT ${COLUMNS} FROM deliveries WHERE receipt_id = ? AND route = 'held'`)
        .bind(receiptId)
        .first<DeliveryState>())!,
  },
];

describe.each(pausedHomes)("$name, resumed", (home) => {
  it(
    "is due at once, and found by the cron's re-drive when the resume's message is lost",
    async () => {
      expect((await pauseRoute(pausableEnv, home.source, "held")).gate).toMatchObject({ paused: true });
      const receiptId = await home.seed();
      await home.hold(receiptId);
      expect(await home.read(receiptId)).toMatchObject({ status: "pending", attempts: 0 });
      // The resume's message is lost.
      const resumed = await resumeRoute({ ...pausableEnv, WORK_QUEUE: recordingQueue([]) }, home.source, "held");
      expect(resumed.resumed).toBe(1);
      const row = await home.read(receiptId);
      expect(row.nextAttemptAt).not.toBeNull();
      expect(row.nextAttemptAt!).toBeLessThanOrEqual(Date.now());
      // Two hours later, the cron sends it again.
      const sent: QueuedWork[] = [];
      await runCron(Date.now() + 2 * 3_600_000, { ...pausableEnv, WORK_QUEUE: recordingQueue(sent) });
      expect(naming(sent, receiptId)).toHaveLength(1);
    },
    CRON_TEST_TIMEOUT_MS,
  );
});

describe.each(homes)("$name, after a local restart", (home) => {
  it("goes back on the queue (its message died with the dev server's queue)", async () => {
    const now = Date.now();
    const receiptId = await home.seed({
      status: "pending",
      attempts: 1,
      leaseGeneration: 1,
      leaseUntil: null,
      nextAttemptAt: now - 1000,
    });
    const sent: QueuedWork[] = [];
    await requeueUnfinished({ ...env, WORK_QUEUE: recordingQueue(sent) }, now);
    expect(naming(sent, receiptId)).toEqual([
      expect.objectContaining(home.name === "a further delivery" ? { route: "audit" } : { source: "routing-fanout" }),
    ]);
  });
});

describe.each(homes)("$name, a first attempt that succeeds", (home) => {
  it("releases nothing: only a delivery that had failed says its destination came back", async () => {
    const now = Date.now();
    // Another delivery to the same route failed and was told to wait an hour (its Retry-After).
    const waitingUntil = now + 3_600_000;
    const waiting = await home.seed({
      status: "pending",
      attempts: 1,
      leaseGeneration: 1,
      leaseUntil: null,
      nextAttemptAt: waitingUntil,
    });
    // A first attempt that has a due time all the same (re-driven, resumed, or a fan-out row due at once).
    const first = await home.seed({
      status: "pending",
      attempts: 0,
      leaseGeneration: 0,
      leaseUntil: null,
      nextAttemptAt: now - 1000,
    });
    expect((await home.process([first], now, Number.POSITIVE_INFINITY)) as Map<string, unknown>).toEqual(
      new Map([[first, { kind: "done", status: "processed" }]]),
    );
    expect(await home.read(waiting)).toMatchObject({ status: "pending", nextAttemptAt: waitingUntil });
  });
});

/** A paused route's abandoned lease: the same two homes as above, each with an attempt whose consumer died. */
describe.each(pausedHomes)("$name, abandoned while its route is paused", (home) => {
  it("asks the gate before it is taken over: held, pending again with its count kept, never re-attempted", async () => {
    expect((await pauseRoute(pausableEnv, home.source, "held")).gate).toMatchObject({ paused: true });
    const receiptId = await home.seed();
    const now = Date.now();
    // Its consumer took the lease (counted the attempt) and died; the lease ran out.
    const table = home.name === "a further delivery" ? "deliveries" : "receipts";
    const key = table === "deliveries" ? "receipt_id = ? AND route = 'held'" : "id = ?";
    await env.DB.prepare(
      `UPDATE ${table} SET status = 'processing', attempts = 1, lease_generation = 1, lease_until = ? WHERE ${key}`,
    )
      .bind(now - 1000, receiptId)
      .run();
    const verdicts = (await home.hold(receiptId)) as Map<string, { kind: string }>;
    expect(verdicts.get(receiptId)).toMatchObject({ kind: "retry" });
    const row = await home.read(receiptId);
    expect(row).toMatchObject({ status: "pending", attempts: 1, leaseGeneration: 1, leaseUntil: null });
    expect(row.nextAttemptAt!).toBeGreaterThan(now);
    await resumeRoute({ ...pausableEnv, WORK_QUEUE: recordingQueue([]) }, home.source, "held");
  });
});

/** Twelve deliveries to one slow forward in one slice: six reach it at once, the rest start when a slot frees. */
const SLOW_MS = 400;
const slotsEnv = () =>
  envWithSources({
    "guarantees-slots-own": {
      provider: "standard-webhooks",
      secrets: ["DEMO_WEBHOOK_SECRET"],
      routes: [{ name: "slow", destination: `${standinOrigin()}/lane/guarantees-slots-own/slow/${SLOW_MS}` }],
    },
    "guarantees-slots-further": {
      provider: "standard-webhooks",
      secrets: ["DEMO_WEBHOOK_SECRET"],
      routes: [
        { name: "plain", destination: "none" },
        { name: "slow", destination: `${standinOrigin()}/lane/guarantees-slots-further/slow/${SLOW_MS}` },
      ],
    },
  });

const slotHomes = [
  {
    name: "the receipt's own delivery",
    source: "guarantees-slots-own",
    table: "receipts",
    key: "id",
    seed: () => seedReceipt({ source: "guarantees-slots-own", payload: { type: "x" } }),
    process: (receiptIds: string[], now: number) => processBatch(slotsEnv(), receiptIds, now),
  },
  {
    name: "a further delivery",
    source: "guarantees-slots-further",
    table: "deliveries",
    key: "receipt_id",
    seed: () =>
      seedFurtherDelivery({
        source: "guarantees-slots-further",
        payload: { type: "x" },
        ownRoute: "plain",
        route: "slow",
      }),
    process: (receiptIds: string[], now: number) => processDeliveries(slotsEnv(), "slow", receiptIds, now),
  },
];

describe.each(slotHomes)("$name, many in one slice", (home) => {
  it("runs at most ATTEMPTS_IN_FLIGHT at once, each attempt started (and signed) when its slot freed", async () => {
    const receiptIds: string[] = [];
    for (let n = 0; n < 2 * ATTEMPTS_IN_FLIGHT; n++) receiptIds.push(await home.seed());
    const now = Date.now();
    const verdicts = await home.process(receiptIds, now);
    expect([...verdicts.values()].every((verdict) => verdict.kind === "done")).toBe(true);
    const requests = await lane(home.source);
    expect(requests).toHaveLength(2 * ATTEMPTS_IN_FLIGHT);
    expect(Math.max(...requests.map((request) => request.openOnArrival))).toBeLessThanOrEqual(ATTEMPTS_IN_FLIGHT);
    const { results } = await env.DB.prepare(
      `SELECT attempt_started_at AS startedAt FROM ${home.table} WHERE ${home.key} IN (SELECT value FROM json_each(?))`,
    )
      .bind(JSON.stringify(receiptIds))
      .all<{ startedAt: number }>();
    const starts = results.map((row) => row.startedAt).sort((a, b) => a - b);
    // The first wave starts with the slice; the second only once a slow answer freed a slot.
    expect(starts.slice(0, ATTEMPTS_IN_FLIGHT).every((startedAt) => startedAt === now)).toBe(true);
    expect(starts.slice(ATTEMPTS_IN_FLIGHT).every((startedAt) => startedAt >= now + SLOW_MS)).toBe(true);
  });
});
