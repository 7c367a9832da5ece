import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { SourceStats } from "../../src/admin/stats/stats";
import { app } from "../../src/app";
import { claimEvent } from "../../src/claims/claim-event";
import { ulid } from "../../src/lib/ulid";
import { loadSources } from "../../src/sources/registry";
import { account, credit, eventually, post, signDemo, waitForStatus } from "../support/deliveries";
import { ADMIN, adminGet, adminPost, deliverTo, seedAlert, seedAttempt, seedReceipt, uniqueSource } from "./support";

type ErrorEnvelope = { error: { code: string; message: string } };
type SearchPage = {
  receipts: { receiptId: string; status: string; bodyRetained: boolean }[];
  nextCursor: string | null;
};

const SOME_RECEIPT = ulid();
const PROTECTED: [method: "GET" | "POST", path: string][] = [
  ["GET", "/admin/api/receipts"],
  ["GET", `/admin/api/receipts/${SOME_RECEIPT}`],
  ["GET", "/admin/api/sources/demo/events/msg_1"],
  ["GET", "/admin/api/dead"],
  ["GET", "/admin/api/quarantine"],
  ["GET", "/admin/api/alerts"],
  ["GET", "/admin/api/stats"],
  ["GET", "/admin/api/no-such-route"],
  ["POST", "/admin/api/dead/replay"],
  ["POST", `/admin/api/receipts/${SOME_RECEIPT}/replay`],
];

function call(method: "GET" | "POST", path: string, headers: Record<string, string>) {
  return method === "GET" ? adminGet(path, headers) : adminPost(path, { receiptIds: [SOME_RECEIPT] }, headers);
}

describe("admin API authentication", () => {
  it("answers 401 with only the error envelope when the bearer token is missing or wrong", async () => {
    await seedReceipt({ source: uniqueSource("auth"), receivedAt: Date.now(), status: "dead" });
    const wrong: Record<string, string>[] = [
      {},
      { authorization: `Bearer ${env.ADMIN_TOKEN}x` },
      { authorization: "Bearer short" },
      { authorization: `Basic ${btoa(`admin:${env.ADMIN_TOKEN}`)}` },
      { authorization: env.ADMIN_TOKEN },
    ];
    // Each from its own address: past 10 wrong tokens a minute, one address is answered 429 (token-guard.test.ts).
    let client = 0;
    for (const [method, path] of PROTECTED) {
      for (const headers of wrong) {
        client += 1;
        const response = await call(method, path, { ...headers, "cf-connecting-ip": `198.51.100.${client}` });
        expect(response.status, `${method} ${path}`).toBe(401);
        expect(await response.json()).toEqual({ error: { code: "unauthorized", message: expect.any(String) } });
      }
    }
  });

  it("is closed, not open, when ADMIN_TOKEN is unset or too short", async () => {
    for (const token of [undefined, "", "too-short"]) {
      const disabledEnv = { ...env, ADMIN_TOKEN: token } as unknown as Env;
      for (const presented of ["", "Bearer undefined", `Bearer ${token}`, `Bearer ${env.ADMIN_TOKEN}`]) {
        const response = await app.fetch(
          new Request("https://receiver.test/admin/api/receipts", { headers: { authorization: presented } }),
          disabledEnv,
        );
        expect(response.status).toBe(503);
        expect(((await response.json()) as ErrorEnvelope).error.code).toBe("admin_disabled");
      }
    }
  });

  it("lets the right token in", async () => {
    const response = await adminGet("/admin/api/receipts?limit=1");
    expect(response.status).toBe(200);
    expect(response.headers.get("cache-control")).toBe("no-store");
  });
});

describe("receipt search", () => {
  const source = uniqueSource("search");
  const t0 = Date.parse("2026-01-10T12:00:00Z");
  const seeded: Record<string, string> = {};

  async function seed() {
    if (Object.keys(seeded).length > 0) return seeded;
    const rows = [
      { name: "r1", receivedAt: t0, status: "processed", eventType: "a", subjectId: "s1", provenance: "live" },
      { name: "r2", receivedAt: t0 + 1000, status: "dead", eventType: "b", subjectId: "s2", provenance: "live" },
      {
        name: "r3",
        receivedAt: t0 + 2000,
        status: "pending",
        eventType: "a",
        subjectId: "s1",
        provenance: "reconciled",
      },
      {
        name: "r4",
        receivedAt: t0 + 3000,
        status: "processed",
        eventType: "a",
        subjectId: "s2",
        provenance: "replayed",
      },
      { name: "r5", receivedAt: t0 + 4000, status: "stale", eventType: "b", subjectId: "s1", provenance: "live" },
    ] as const;
    for (const { name, ...row } of rows) seeded[name] = await seedReceipt({ source, ...row, eventKey: `key_${name}` });
    return seeded;
  }

  async function search(query: string): Promise<string[]> {
    const response = await adminGet(`/admin/api/receipts?source=${source}&${query}`);
    expect(response.status).toBe(200);
    const page = await response.json<SearchPage>();
    const names = Object.fromEntries(Object.entries(seeded).map(([name, receiptId]) => [receiptId, name]));
    return page.receipts.map((receipt) => names[receipt.receiptId] ?? receipt.receiptId);
  }

  it("filters by every field, newest first", async () => {
    await seed();
    expect(await search("")).toEqual(["r5", "r4", "r3", "r2", "r1"]);
    expect(await search("status=processed,stale")).toEqual(["r5", "r4", "r1"]);
    expect(await search("status=dead")).toEqual(["r2"]);
    expect(await search("type=a&subject=s1")).toEqual(["r3", "r1"]);
    expect(await search("provenance=reconciled")).toEqual(["r3"]);
    expect(await search("provenance=replayed")).toEqual(["r4"]);
    expect(await search("eventKey=key_r2")).toEqual(["r2"]);
    expect(await search(`since=${new Date(t0 + 1000).toISOString()}&until=${t0 + 3001}`)).toEqual(["r4", "r3", "r2"]);
    expect(await search("type=nothing-like-this")).toEqual([]);
  });

  it("pages with a keyset cursor on the receipt id: no gaps, no repeats", async () => {
    await seed();
    const pages: string[][] = [];
    let cursor: string | null = null;
    do {
      const response = await adminGet(
        `/admin/api/receipts?source=${source}&limit=2${cursor ? `&before=${cursor}` : ""}`,
      );
      const page = await response.json<SearchPage>();
      pages.push(page.receipts.map((receipt) => receipt.receiptId));
      cursor = page.nextCursor;
    } while (cursor !== null);
    expect(pages).toEqual([[seeded.r5, seeded.r4], [seeded.r3, seeded.r2], [seeded.r1]]);
  });

  it("refuses unreadable filters with a 400 that names the parameter", async () => {
    for (const [query, parameter] of [
      ["status=bogus", "status"],
      ["provenance=guessed", "provenance"],
      ["limit=0", "limit"],
      ["limit=201", "limit"],
      ["before=not-a-ulid", "before"],
      ["since=yesterday-ish", "since"],
      [`since=${t0 + 5}&until=${t0}`, "since"],
    ] as const) {
      const response = await adminGet(`/admin/api/receipts?${query}`);
      expect(response.status, query).toBe(400);
      const envelope = await response.json<ErrorEnvelope>();
      expect(envelope.error.code).toBe("invalid_query");
      expect(envelope.error.message).toContain(`"${parameter}"`);
    }
  });
});

describe("one receipt, as the pipeline recorded it", () => {
  it("returns the raw body, kept headers, attempts and quarantined copies, and never the signature", async () => {
    const eventKey = `msg_detail_${crypto.randomUUID()}`;
    const payload = credit(`acct_${eventKey}`, 7);
    const sentBody = JSON.stringify(payload);
    const accepted = await deliverTo("admin-audit", eventKey, payload);
    const { receipt: receiptId } = await accepted.json<{ receipt: string }>();
    await waitForStatus("admin-audit", eventKey);

    const tampered = JSON.stringify(credit(`acct_${eventKey}`, 7000));
    const headers = signDemo(eventKey, tampered);
    expect(await (await post("/webhooks/admin-audit", tampered, headers)).json()).toMatchObject({
      status: "quarantined",
    });

    const detail = await eventually(async () => {
      const body = await (await adminGet(`/admin/api/receipts/${receiptId}`)).json<{
        receipt: Record<string, unknown> & {
          body: { encoding: string; text: string };
          keptHeaders: Record<string, string>;
        };
        attempts: { attemptNumber: number; outcome: string; durationMs: number }[];
        quarantine: { reason: string; body: { text: string }; originalReceiptId: string }[];
      }>();
      return body.quarantine.length > 0 ? body : undefined;
    });
    expect(detail.receipt).toMatchObject({
      receiptId,
      source: "admin-audit",
      eventKey,
      eventType: "account.credited",
      status: "processed",
      provenance: "live",
    });
    expect(detail.receipt.body).toEqual({ encoding: "utf8", text: sentBody });
    expect(detail.receipt.keptHeaders["content-type"]).toBe("application/json");
    expect(JSON.stringify(detail)).not.toContain(headers["webhook-signature"]);
    expect(detail.attempts).toEqual([expect.objectContaining({ attemptNumber: 1, outcome: "processed" })]);
    expect(detail.quarantine).toEqual([
      expect.objectContaining({
        reason: "payload-mismatch",
        originalReceiptId: receiptId,
        body: { encoding: "utf8", text: tampered },
      }),
    ]);

    const byEventKey = await adminGet(`/admin/api/sources/admin-audit/events/${encodeURIComponent(eventKey)}`);
    expect(byEventKey.status).toBe(200);
    expect(await byEventKey.json()).toEqual(detail);
    const unknownEvent = await adminGet(`/admin/api/sources/admin-audit/events/${eventKey}_never_sent`);
    expect(unknownEvent.status).toBe(404);
    expect((await unknownEvent.json<ErrorEnvelope>()).error.code).toBe("event_not_found");

    const listed = await (await adminGet("/admin/api/quarantine?source=admin-audit&limit=200")).json<{
      quarantine: { originalReceiptId: string }[];
    }>();
    expect(listed.quarantine.map((record) => record.originalReceiptId)).toContain(receiptId);
  });

  it("says when the body is no longer retained, and shows non-UTF-8 bytes as base64", async () => {
    const source = uniqueSource("detail");
    const dropped = await seedReceipt({ source, receivedAt: Date.now(), body: null });
    const binary = await seedReceipt({ source, receivedAt: Date.now(), body: Buffer.from([0xff, 0xfe, 0x00, 0x41]) });
    expect(
      (await (await adminGet(`/admin/api/receipts/${dropped}`)).json<{ receipt: { body: unknown } }>()).receipt.body,
    ).toBeNull();
    expect(
      (await (await adminGet(`/admin/api/receipts/${binary}`)).json<{ receipt: { body: unknown } }>()).receipt.body,
    ).toEqual({
      encoding: "base64",
      text: "//4AQQ==",
    });
    const page = await (await adminGet(`/admin/api/receipts?source=${source}`)).json<SearchPage>();
    expect(page.receipts.map((receipt) => receipt.bodyRetained).sort()).toEqual([false, true]);
  });

  it("answers 404 for an unknown id and 400 for something that is not an id", async () => {
    // An id of next year's: no ring partition of its period can have been archived (another file may archive today's,
    // and an id there is answered receipt_archived, test/databases/).
    const missing = await adminGet(`/admin/api/receipts/${ulid(Date.now() + 365 * 86_400_000)}`);
    expect(missing.status).toBe(404);
    expect((await missing.json<ErrorEnvelope>()).error.code).toBe("receipt_not_found");
    const bad = await adminGet("/admin/api/receipts/not-a-ulid");
    expect(bad.status).toBe(400);
  });
});

describe("dead letters", () => {
  it("lists only dead receipts, with their last error", async () => {
    const eventKey = `msg_dead_${crypto.randomUUID()}`;
    await deliverTo("admin-audit", eventKey, {
      type: "account.credited",
      data: { account: "acct_dead", amount: "lots" },
    });
    await waitForStatus("admin-audit", eventKey, ["dead"]);
    const page = await (await adminGet(`/admin/api/dead?source=admin-audit&eventKey=${eventKey}`)).json<
      SearchPage & { receipts: { lastError: string }[] }
    >();
    expect(page.receipts).toHaveLength(1);
    expect(page.receipts[0]).toMatchObject({ status: "dead", lastError: expect.stringContaining("amount") });
    const all = await (await adminGet("/admin/api/dead?limit=200")).json<SearchPage>();
    expect(all.receipts.every((receipt) => receipt.status === "dead")).toBe(true);
    expect((await adminGet("/admin/api/dead?status=processed")).status).toBe(400);
  });

  it("refuses malformed bulk replay requests and changes nothing", async () => {
    const source = uniqueSource("replay-bad");
    const receiptId = await seedReceipt({ source, receivedAt: Date.now(), status: "dead", lastError: "boom" });
    for (const body of [
      [],
      { receiptIds: [] },
      { receiptIds: ["nope"] },
      { receiptIds: Array(101).fill(receiptId) },
      { source: "admin-audit", limit: 5000 },
      { source: { nested: true } },
    ]) {
      const response = await adminPost("/admin/api/dead/replay", body);
      expect(response.status, JSON.stringify(body).slice(0, 60)).toBe(400);
    }
    const notJson = await adminPost("/admin/api/dead/replay", undefined, { ...ADMIN });
    expect(notJson.status).toBe(400);
    const detail = await (await adminGet(`/admin/api/receipts/${receiptId}`)).json<{ receipt: { status: string } }>();
    expect(detail.receipt.status).toBe("dead");
  });
});

describe("replay", () => {
  /** A dead letter whose body is fine: it died of a destination outage, which has since ended. */
  async function seedDeadLetter(receivedAt = Date.now(), eventType = "account.credited") {
    const eventKey = `msg_replay_${crypto.randomUUID()}`;
    const accountId = `acct_${eventKey}`;
    const receiptId = await seedReceipt({
      source: "admin-audit",
      eventKey,
      eventType,
      subjectId: accountId,
      receivedAt,
      status: "dead",
      attempts: 13,
      lastError: "gave up after 13 attempts: destination answered 503",
      body: Buffer.from(JSON.stringify(credit(accountId, 5))),
    });
    return { receiptId, eventKey, accountId };
  }

  it("replays one dead letter through the queue, once", async () => {
    const dead = await seedDeadLetter();
    const response = await adminPost(`/admin/api/receipts/${dead.receiptId}/replay`, {});
    expect(response.status).toBe(202);
    expect(await response.json()).toEqual({ receiptId: dead.receiptId, outcome: "replayed" });
    await waitForStatus("admin-audit", dead.eventKey);
    expect((await account(dead.accountId))?.credits).toBe(5);
    const detail = await (await adminGet(`/admin/api/receipts/${dead.receiptId}`)).json<{
      receipt: { provenance: string; replayCount: number; replayedAt: number | null };
    }>();
    // A replay never rewrites where the event came from; it is counted and timed instead.
    expect(detail.receipt).toMatchObject({ provenance: "live", replayCount: 1, replayedAt: expect.any(Number) });
    // Still found as replayed: the filter means "replayed at least once", whatever the event's provenance.
    const replayedOnes = await (
      await adminGet(`/admin/api/receipts?source=admin-audit&provenance=replayed&eventKey=${dead.eventKey}`)
    ).json<{ receipts: { receiptId: string }[] }>();
    expect(replayedOnes.receipts.map((receipt) => receipt.receiptId)).toEqual([dead.receiptId]);

    // Replaying the now-processed receipt again applies nothing: its processed key blocks a second effect.
    expect((await adminPost(`/admin/api/receipts/${dead.receiptId}/replay`, {})).status).toBe(202);
    await waitForStatus("admin-audit", dead.eventKey);
    expect((await account(dead.accountId))?.credits).toBe(5);
  });

  it("says why nothing was replayed: unknown id, already in flight", async () => {
    const unknown = await adminPost(`/admin/api/receipts/${ulid()}/replay`, {});
    expect(unknown.status).toBe(404);
    const pending = await seedReceipt({
      source: uniqueSource("inflight"),
      receivedAt: Date.now(),
      status: "pending",
      body: Buffer.from("{}"),
    });
    const inFlight = await adminPost(`/admin/api/receipts/${pending}/replay`, {});
    expect(inFlight.status).toBe(409);
    expect((await inFlight.json<ErrorEnvelope>()).error.code).toBe("receipt_in_flight");
  });

  it("replays dead letters in bulk, by ids and by filter, page by page", async () => {
    const [first, second] = [await seedDeadLetter(), await seedDeadLetter()];
    const byIds = await (
      await adminPost("/admin/api/dead/replay", { receiptIds: [first.receiptId, second.receiptId, ulid()] })
    ).json<{
      replayed: number;
      results: { outcome: string }[];
    }>();
    expect(byIds.replayed).toBe(2);
    expect(byIds.results.map((result) => result.outcome)).toEqual(["replayed", "replayed", "not_found"]);

    // A time slice nobody else writes to, so the filter sees exactly these three.
    const slice = Date.parse("2025-03-01T00:00:00Z") + Math.floor(Math.random() * 1e9);
    const batch = [await seedDeadLetter(slice), await seedDeadLetter(slice + 1), await seedDeadLetter(slice + 2)];
    const filter = { source: "admin-audit", since: slice, until: new Date(slice + 3).toISOString(), limit: 2 };
    const firstPage = await (await adminPost("/admin/api/dead/replay", filter)).json<{
      replayed: number;
      more: boolean;
    }>();
    expect(firstPage).toMatchObject({ replayed: 2, more: true });
    const secondPage = await (await adminPost("/admin/api/dead/replay", filter)).json<{
      replayed: number;
      more: boolean;
    }>();
    expect(secondPage).toMatchObject({ replayed: 1, more: false });

    for (const dead of [first, second, ...batch]) {
      await waitForStatus("admin-audit", dead.eventKey);
      expect((await account(dead.accountId))?.credits).toBe(5);
    }
  });

  it("replays by filter only the dead letters of the type asked for", async () => {
    // A time slice nobody else writes to, holding one dead letter of each type.
    const slice = Date.parse("2025-06-01T00:00:00Z") + Math.floor(Math.random() * 1e9);
    const credited = await seedDeadLetter(slice);
    const otherType = await seedDeadLetter(slice + 1, "account.closed");
    const filter = {
      source: "admin-audit",
      type: "account.credited",
      since: slice,
      until: new Date(slice + 2).toISOString(),
    };
    const response = await adminPost("/admin/api/dead/replay", filter);
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({
      replayed: 1,
      more: false,
      results: [{ receiptId: credited.receiptId, outcome: "replayed" }],
    });

    expect(await waitForStatus("admin-audit", credited.eventKey)).toBe("processed");
    expect((await account(credited.accountId))?.credits).toBe(5);
    const untouched = await (await adminGet(`/admin/api/receipts/${otherType.receiptId}`)).json<{
      receipt: { status: string; replayCount: number };
    }>();
    expect(untouched.receipt).toMatchObject({ status: "dead", replayCount: 0 });
  });
});

describe("alerts", () => {
  it("lists alerts by source and state", async () => {
    const source = uniqueSource("alerts");
    const now = Date.now();
    const open = await seedAlert({ source, kind: "silence", openedAt: now, detail: "no deliveries for 2h" });
    await seedAlert({ source, kind: "dead-letters", state: "resolved", openedAt: now - 1000, resolvedAt: now });
    const body = await (await adminGet(`/admin/api/alerts?source=${source}&state=open`)).json<{
      alerts: { alertId: string; kind: string }[];
    }>();
    expect(body.alerts).toEqual([expect.objectContaining({ alertId: open, kind: "silence" })]);
    const both = await (await adminGet(`/admin/api/alerts?source=${source}`)).json<{ alerts: unknown[] }>();
    expect(both.alerts).toHaveLength(2);
    expect((await adminGet("/admin/api/alerts?state=maybe")).status).toBe(400);
  });
});

type Stats = { sources: SourceStats[]; notes: Record<string, string> };

describe("per-source stats", () => {
  async function statsFor(source: string, window = "24h") {
    const response = await adminGet(`/admin/api/stats?source=${source}&window=${window}`);
    expect(response.status).toBe(200);
    return (await response.json<Stats>()).sources[0]!;
  }

  it("counts statuses, the oldest pending, and nearest-rank latency percentiles from D1", async () => {
    const source = uniqueSource("stats");
    const now = Date.now();
    const receivedAt = now - 60_000;
    // Odd ones succeed on their first attempt, which lives only in the receipt row; even ones fail once (an
    // attempt row numbered 1) and then succeed in 1 s (the receipt row again).
    for (let duration = 1; duration <= 100; duration++) {
      const firstTry = duration % 2 === 1;
      const receiptId = await seedReceipt({
        source,
        receivedAt,
        status: "processed",
        processedAt: receivedAt + duration * 10,
        leaseGeneration: firstTry ? 1 : 2,
        attemptStartedAt: firstTry ? receivedAt + duration : receivedAt + duration * 5,
        attemptDurationMs: firstTry ? duration : 1000,
      });
      if (!firstTry) {
        await seedAttempt({
          receiptId,
          attemptNumber: 1,
          startedAt: receivedAt + duration,
          finishedAt: receivedAt + duration * 2,
          outcome: "retry",
          durationMs: duration,
        });
      }
    }
    await seedReceipt({ source, receivedAt: now - 30 * 60_000, status: "pending" });
    await seedReceipt({ source, receivedAt, status: "dead", lastError: "boom" });
    await seedReceipt({ source, receivedAt, status: "stale", provenance: "reconciled" });
    await seedReceipt({ source, receivedAt: now - 3 * 86_400_000, status: "dead" });

    const stats = await statsFor(source);
    expect(stats).toMatchObject({
      received: 103,
      processed: 100,
      pending: 1,
      dead: 1,
      stale: 1,
      reconciled: 1,
      deadTotal: 2,
      oldestPendingReceivedAt: now - 30 * 60_000,
      health: "failing",
      configured: false,
      rejectedSignatures: null,
      ackLatencyMs: null,
    });
    // 1..100 (each first attempt) and fifty 1 s second attempts.
    expect(stats.attemptDurationMs).toEqual({ samples: 150, p50: 75, p95: 1000, p99: 1000, max: 1000 });
    expect(stats.pickupLatencyMs).toEqual({ samples: 100, p50: 50, p95: 95, p99: 99, max: 100 });
    expect(stats.processingLatencyMs).toEqual({ samples: 100, p50: 500, p95: 950, p99: 990, max: 1000 });

    expect(stats.healthReasons).toEqual([
      { reason: "dead-letters", count: 2, message: expect.stringMatching(/^2 dead letters/) },
      { reason: "backlog", ageMs: expect.any(Number), message: expect.stringMatching(/waited 30 min/) },
    ]);

    const lastHour = await statsFor(source, "1h");
    expect(lastHour.received).toBe(103);
    expect(lastHour.deadTotal).toBe(2);
    expect((await statsFor(source, "10m")).received).toBe(102);
  });

  it("times pickup from the first attempt, never from a replay's, and says where each number came from", async () => {
    const source = uniqueSource("stats-replay");
    const receivedAt = Date.now() - 120_000;
    // Processed first try 40 ms after arrival, then replayed a minute later: the row now holds the replay's attempt.
    await seedReceipt({
      source,
      receivedAt,
      status: "processed",
      processedAt: receivedAt + 90,
      leaseGeneration: 2,
      replayCount: 1,
      replayedAt: receivedAt + 60_000,
      attemptStartedAt: receivedAt + 60_010,
      attemptDurationMs: 7,
    });
    await seedReceipt({
      source,
      receivedAt,
      status: "processed",
      processedAt: receivedAt + 90,
      leaseGeneration: 1,
      attemptStartedAt: receivedAt + 40,
      attemptDurationMs: 9,
    });
    const response = await adminGet(`/admin/api/stats?source=${source}`);
    const report = await response.json<Stats & { origins: Record<string, string> }>();
    const stats = report.sources[0]!;
    expect(stats.pickupLatencyMs).toEqual({ samples: 1, p50: 40, p95: 40, p99: 40, max: 40 });
    expect(stats.attemptDurationMs.samples).toBe(2);
    expect(stats).toMatchObject({ received: 2, processed: 2, replayed: 1, health: "ok", healthReasons: [] });
    expect(report.origins).toMatchObject({
      counts: "d1",
      duplicates: "claim-shards",
      rejectedSignatures: "not-stored",
      ackLatencyMs: "not-stored",
    });
  });

  it("counts live duplicates from the claim shards; rejected signatures are not counted anywhere", async () => {
    const hourBefore = Math.floor(Date.now() / 3_600_000) * 3_600_000;
    const before = await statsFor("admin-audit");
    const eventKey = `msg_stats_${crypto.randomUUID()}`;
    const payload = credit("acct_stats", 1);
    const answers = await Promise.all([1, 2, 3].map(() => deliverTo("admin-audit", eventKey, payload)));
    const statuses = await Promise.all(answers.map(async (answer) => (await answer.json<{ status: string }>()).status));
    expect(statuses.sort()).toEqual(["accepted", "duplicate", "duplicate"]);
    const body = JSON.stringify(payload);
    const forged = await post("/webhooks/admin-audit", body, {
      ...signDemo(`${eventKey}_forged`, body),
      "webhook-signature": "v1,AAAA",
    });
    expect(forged.status).toBe(401);
    await waitForStatus("admin-audit", eventKey);

    const after = await statsFor("admin-audit");
    expect(after.duplicates! - before.duplicates!).toBe(2);
    const sinceBefore = (stats: SourceStats) =>
      (stats.duplicatesByHour ?? [])
        .filter((row) => row.hour >= hourBefore)
        .reduce((total, row) => total + row.deliveries, 0);
    expect(sinceBefore(after) - sinceBefore(before)).toBe(2);
    expect(after.received - before.received).toBe(1);
    expect(after.processed - before.processed).toBe(1);
    expect(after.rejectedSignatures).toBeNull();
    const report = await (await adminGet("/admin/api/stats")).json<Stats>();
    expect(report.notes.rejectedSignatures).toMatch(/Workers Logs/);
    expect(report.sources.map((entry) => entry.source)).toEqual(expect.arrayContaining(["demo", "admin-audit"]));
    // Counting duplicates asks every shard of a source, so only single-source reports do it.
    expect(report.sources.every((entry) => entry.duplicates === null)).toBe(true);
  });

  it("does not count a reconciliation fetch of an event already held as a duplicate", async () => {
    const eventKey = `msg_recon_dup_${crypto.randomUUID()}`;
    const payload = credit("acct_recon_dup", 1);
    expect((await (await deliverTo("admin-audit", eventKey, payload)).json<{ status: string }>()).status).toBe(
      "accepted",
    );
    const before = await statsFor("admin-audit");
    const rawBody = new TextEncoder().encode(JSON.stringify(payload));
    const again = await claimEvent(env, {
      source: loadSources(env).get("admin-audit")!,
      identity: {
        eventKey,
        eventKeyOrigin: "provider-id",
        eventKeySigned: true,
        eventType: "account.credited",
        subjectId: null,
        version: null,
        occurredAt: null,
      },
      rawBody,
      keptHeaders: {},
      receivedAt: Date.now(),
      provenance: "reconciled",
    });
    expect(again.disposition).toBe("duplicate");
    expect((await statsFor("admin-audit")).duplicates).toBe(before.duplicates);
    await waitForStatus("admin-audit", eventKey);
  });

  it("refuses an unreadable window and an unknown source", async () => {
    expect((await adminGet("/admin/api/stats?window=forever")).status).toBe(400);
    expect((await adminGet("/admin/api/stats?window=90d")).status).toBe(400);
    const unknown = await adminGet(`/admin/api/stats?source=${uniqueSource("nobody")}`);
    expect(unknown.status).toBe(404);
  });
});
