import { env } from "cloudflare:workers";
import { inArray } from "drizzle-orm";
import { beforeAll, describe, expect, it } from "vitest";
import type { RouteTestReport } from "../../src/admin/route-test/route-test";
import { segmentLocation } from "../../src/bodies/segment-format";
import { sha256Hex } from "../../src/crypto/digest";
import { utf8Bytes } from "../../src/crypto/encoding";
import { database } from "../../src/db/client";
import { deliveries, receipts } from "../../src/db/schema";
import { type MeterTotals, meterReading } from "../../src/lib/meter";
import { ulid } from "../../src/lib/ulid";
import { adminPost, seedReceipt } from "./support";

/**
 * POST /admin/api/sources/:source/route-test (`route test --last`): the newest stored receipts of
 * `route-test-trial` (routes ledger, checked, quiet: test/fixtures/sources/route-test.json) run through every route,
 * now's or a draft's, with bodies in the D1 row, an R2 object and a segment, and bodies gone or failing their hash
 * counted rather than evaluated. Nothing is sent, enqueued or written.
 */

const SOURCE = "route-test-trial";
const PATH = `/admin/api/sources/${SOURCE}/route-test`;
const credit = (account: string, amount: number) => ({ type: "account.credited", data: { account, amount } });
const planChanged = { type: "plan.changed", data: { account: "acct_plan", plan: "pro" } };
/** The fixtures' forward target, on whichever port this run's stand-in took (vitest.config.ts). */
const OK_DESTINATION = (env.SOURCES as Record<string, SourceTable>)[SOURCE]!.routes[0]!.destination;
const seeded: string[] = [];
let time = Date.now() - 60_000;

async function seed(payload: unknown, where: "row" | "object" | "segment" | "gone" | "lost-object" | "corrupt") {
  const bytes = utf8Bytes(JSON.stringify(payload));
  const receivedAt = (time += 1_000);
  const receiptId = ulid(receivedAt);
  const type = (payload as { type: string }).type;
  const row = { receiptId, source: SOURCE, receivedAt, status: "processed" as const, eventType: type, subjectId: null };
  const payloadSha256 = await sha256Hex(bytes);
  const key = `segments/${SOURCE}/2026-12-05/${receiptId}-test`;
  if (where === "row") await seedReceipt({ ...row, body: Buffer.from(bytes), payloadSha256 });
  if (where === "gone") await seedReceipt({ ...row, body: null, payloadSha256 });
  if (where === "object") await env.BODIES.put(receiptId, bytes);
  if (where === "object" || where === "lost-object") await seedReceipt({ ...row, bodyLocation: "r2", payloadSha256 });
  if (where === "segment" || where === "corrupt") {
    // A segment holding another body first, then this one: read back by range and checked against its hash.
    const other = utf8Bytes("x".repeat(11));
    await env.BODIES.put(key, new Uint8Array([...other, ...bytes]));
    const location = segmentLocation({ key, offset: other.byteLength, length: bytes.byteLength });
    await seedReceipt({
      ...row,
      bodyLocation: location,
      payloadSha256: where === "corrupt" ? "0".repeat(64) : payloadSha256,
    });
  }
  seeded.push(receiptId);
}

async function routeTest(body: unknown): Promise<{ status: number; json: RouteTestAnswer }> {
  const response = await adminPost(PATH, body);
  return { status: response.status, json: await response.json() };
}

/** The isolate's own meters: the test runs in the Worker's isolate, so they count what the route does. */
const meters = (): MeterTotals => meterReading().totals;

type SourceTable = { routes: Record<string, unknown>[] };
/** The report or the error envelope, read as either (each test knows which it asked for). */
type RouteTestAnswer = Required<RouteTestReport> & { error: { code: string; message: string } };

/** The source's table with ledger's transform changed, checked taken out and audit (to a listener) added. */
function draft(): SourceTable {
  const table = structuredClone((env.SOURCES as Record<string, SourceTable>)[SOURCE]!);
  table.routes = [
    { ...table.routes[0], transform: '{ "account": data.account, "credits": data.amount * 10 }' },
    { name: "audit", destination: "listen:trial-audit", filter: { type: "plan.changed" } },
    table.routes[2]!,
  ];
  return table;
}

beforeAll(async () => {
  await seed(credit("acct_row", 100), "row");
  await seed(credit("acct_half", 1.5), "row");
  await seed(planChanged, "row");
  await seed(credit("acct_object", 7), "object");
  await seed(credit("acct_segment", 9), "segment");
  await seed(credit("acct_gone", 1), "gone");
  await seed(credit("acct_lost", 1), "lost-object");
  await seed(credit("acct_corrupt", 1), "corrupt");
});

describe("POST /admin/api/sources/:source/route-test", () => {
  it("runs every route, not only the first, over the newest receipts, counting bodies past retention", async () => {
    const { status, json } = await routeTest({ last: 200 });
    expect(status).toBe(200);
    expect(json.config).toBe("current");
    expect(json.receipts).toEqual({ read: 8, evaluated: 5, bodyPastRetention: 2, bodyFailedIntegrity: 1 });
    expect(json.routes).toEqual([
      {
        route: "ledger",
        destination: OK_DESTINATION,
        match: 4,
        skipped: 1,
        wouldDie: 0,
        skipReasons: { "filtered out by route ledger": 1 },
        dieReasons: {},
      },
      {
        route: "checked",
        destination: OK_DESTINATION,
        match: 4,
        skipped: 0,
        wouldDie: 1,
        skipReasons: {},
        dieReasons: {
          'schema mismatch on route checked: #/data/amount: Instance type "number" is invalid. Expected "integer".': 1,
        },
      },
      {
        route: "quiet",
        destination: "none",
        match: 0,
        skipped: 5,
        wouldDie: 0,
        skipReasons: { "the route has no destination": 5 },
        dieReasons: {},
      },
    ]);
    expect(json.changes).toBeUndefined();
  });

  it("takes the newest `last` receipts, and one route with `route`", async () => {
    const { json } = await routeTest({ last: 5, route: "ledger" });
    // The five newest: corrupt, lost, gone, segment, object.
    expect(json.receipts).toEqual({ read: 5, evaluated: 2, bodyPastRetention: 2, bodyFailedIntegrity: 1 });
    expect(json.routes.map((tally: { route: string }) => tally.route)).toEqual(["ledger"]);
    expect(json.routes[0]).toMatchObject({ match: 2, skipped: 0, wouldDie: 0 });
  });

  it("tests a draft beside now's config and lists each changed event's outcome on both", async () => {
    const { status, json } = await routeTest({ last: 200, draft: draft() });
    expect(status).toBe(200);
    expect(json.config).toBe("draft");
    expect(json.routes.map((tally: { route: string; match: number }) => [tally.route, tally.match])).toEqual([
      ["ledger", 4],
      ["audit", 1],
      ["quiet", 0],
    ]);
    expect(json.routes[1]!.destination).toBe("listen:trial-audit");
    expect(json.currentRoutes.map((tally: { route: string }) => tally.route)).toEqual(["ledger", "checked", "quiet"]);
    // Every event changes: ledger's output for each of the 4 credits, checked gone and audit new for all 5.
    expect(json.changes.events).toBe(5);
    const row = seeded[0]!;
    const rowChanges = json.changes.listed.filter((change: { receiptId: string }) => change.receiptId === row);
    expect(rowChanges).toEqual([
      {
        receiptId: row,
        eventKey: `evt_${row}`,
        eventType: "account.credited",
        route: "ledger",
        current: { kind: "match", sends: "transform", output: { account: "acct_row", amount: 100 }, headers: null },
        draft: { kind: "match", sends: "transform", output: { account: "acct_row", credits: 1000 }, headers: null },
      },
      {
        receiptId: row,
        eventKey: `evt_${row}`,
        eventType: "account.credited",
        route: "checked",
        current: { kind: "match", sends: "original", headers: null },
        draft: null,
      },
      {
        receiptId: row,
        eventKey: `evt_${row}`,
        eventType: "account.credited",
        route: "audit",
        current: null,
        draft: { kind: "skipped", reason: "filtered out by route audit" },
      },
    ]);
    // quiet is the same in both: never listed.
    expect(json.changes.listed.some((change: { route: string }) => change.route === "quiet")).toBe(false);
    expect(json.changes.listed.length + json.changes.leftOut).toBe(14);
  });

  it("sends, enqueues and writes nothing", async () => {
    const before = meters();
    expect((await routeTest({ last: 200 })).status).toBe(200);
    expect((await routeTest({ last: 200, draft: draft() })).status).toBe(200);
    const after = meters();
    // The meters saw the reads, so they would have seen a write.
    expect(after.d1RowsRead - before.d1RowsRead).toBeGreaterThan(0);
    expect(after.r2ClassB - before.r2ClassB).toBeGreaterThan(0);
    for (const meter of ["d1RowsWritten", "queueOperations", "r2ClassA", "doRowsWritten"] as const)
      expect(after[meter] - before[meter], meter).toBe(0);
    const db = database(env);
    expect(await db.select().from(deliveries).where(inArray(deliveries.receiptId, seeded))).toEqual([]);
    const statuses = await db
      .select({ status: receipts.status, attempts: receipts.attempts })
      .from(receipts)
      .where(inArray(receipts.receiptId, seeded));
    expect(statuses).toEqual(seeded.map(() => ({ status: "processed", attempts: 0 })));
  });

  it("refuses more than 1000 events, an unknown route, a broken draft and an unknown key, each saying why", async () => {
    const tooMany = await routeTest({ last: 1001 });
    expect(tooMany.status).toBe(400);
    expect(tooMany.json.error.message).toMatch(/"last" must be a whole number from 1 to 1000/);
    const noRoute = await routeTest({ last: 10, route: "ledgr" });
    expect(noRoute.status).toBe(404);
    expect(noRoute.json.error.message).toMatch(/no route "ledgr"; its routes: ledger, checked, quiet/);
    const broken = draft();
    broken.routes[0]!.transform = "{ nope";
    const badDraft = await routeTest({ last: 10, draft: broken });
    expect(badDraft.status).toBe(400);
    expect(badDraft.json.error).toMatchObject({ code: "invalid_draft" });
    expect(badDraft.json.error.message).toMatch(/route ledger: transform is not a valid JSONata expression/);
    const typo = await routeTest({ lst: 10 });
    expect(typo.status).toBe(400);
    expect(typo.json.error.message).toMatch(/Unknown key "lst" \(did you mean "last"\?\)/);
    expect((await adminPost(PATH, { last: 10 }, {})).status).toBe(401);
    const unknown = await adminPost("/admin/api/sources/no-such-source/route-test", { last: 10 });
    expect(unknown.status).toBe(404);
  });
});
