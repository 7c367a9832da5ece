import { describe, expect, it } from "vitest";
import { ulid } from "../../src/lib/ulid";
import { adminGet, adminPost, seedReceipt, uniqueSource } from "./support";

/**
 * The admin API reads its input strictly: a misspelt query parameter or body key is a 400 that names it (and
 * what it probably meant), never a filter silently dropped — which would widen a search to everything, or point
 * a bulk replay at dead letters nobody asked for. A bulk replay by filter must say its scope.
 */

type ErrorEnvelope = { error: { code: string; message: string } };

async function deadLetter(source: string, receivedAt = Date.now()): Promise<string> {
  return seedReceipt({
    source,
    receivedAt,
    status: "dead",
    eventType: "account.credited",
    lastError: "boom",
    body: Buffer.from("{}"),
  });
}

async function statusOf(receiptId: string): Promise<string> {
  return (await (await adminGet(`/admin/api/receipts/${receiptId}`)).json<{ receipt: { status: string } }>()).receipt
    .status;
}

describe("unknown query parameters", () => {
  it("are refused on every route with a 400 that names them", async () => {
    const receiptId = await deadLetter(uniqueSource("strict-routes"));
    for (const [method, path] of [
      ["GET", "/admin/api/receipts?sttus=dead"],
      ["GET", `/admin/api/receipts/${receiptId}?verbose=1`],
      ["GET", "/admin/api/sources/demo/events/msg_1?verbose=1"],
      ["GET", "/admin/api/dead?sorce=demo"],
      ["GET", "/admin/api/quarantine?state=open"],
      ["GET", "/admin/api/alerts?status=open"],
      ["GET", "/admin/api/sources?verbose=1"],
      ["GET", "/admin/api/stats?windw=1h"],
      ["POST", `/admin/api/receipts/${receiptId}/replay?force=1`],
      ["POST", "/admin/api/dead/replay?source=demo"],
    ] as const) {
      const response = method === "GET" ? await adminGet(path) : await adminPost(path, { source: "demo" });
      expect(response.status, path).toBe(400);
      const { error } = await response.json<ErrorEnvelope>();
      expect(error.code, path).toBe("unknown_parameter");
      const parameter = new URL(path, "https://receiver.test").searchParams.keys().next().value!;
      expect(error.message, path).toContain(`"${parameter}"`);
    }
    // The single-receipt replay refused above left the receipt alone.
    expect(await statusOf(receiptId)).toBe("dead");
  });

  it("say what a typo was probably meant to be", async () => {
    const { error } = await (await adminGet("/admin/api/receipts?sttus=dead")).json<ErrorEnvelope>();
    expect(error.message).toContain('"sttus" (did you mean "status"?)');
    // /receipts reads the search filters and the changes parameters, which share names: each is listed once.
    const accepted = /accepted: (.*)\.$/.exec(error.message)![1]!.split(", ");
    expect(accepted).toEqual([...new Set(accepted)]);
    expect(accepted).toEqual(expect.arrayContaining(["source", "status", "limit", "changedSince"]));
    const snake = await (await adminGet("/admin/api/receipts?event_key=msg_1")).json<ErrorEnvelope>();
    expect(snake.error.message).toContain('"event_key" (did you mean "eventKey"?)');
  });

  it("leave the known ones working: eventKey filters, as the answers spell it", async () => {
    const source = uniqueSource("strict-key");
    const receiptId = await deadLetter(source);
    await deadLetter(source);
    const page = await (await adminGet(`/admin/api/receipts?source=${source}&eventKey=evt_${receiptId}`)).json<{
      receipts: { receiptId: string; eventKey: string }[];
    }>();
    expect(page.receipts.map((receipt) => receipt.receiptId)).toEqual([receiptId]);
    expect(page.receipts[0]!.eventKey).toBe(`evt_${receiptId}`);
    const dead = await (await adminGet(`/admin/api/dead?source=${source}&eventKey=evt_${receiptId}`)).json<{
      receipts: unknown[];
    }>();
    expect(dead.receipts).toHaveLength(1);
  });
});

describe("bulk replay's body", () => {
  it("refuses an unknown key, naming it, and replays nothing", async () => {
    const source = uniqueSource("strict-body");
    const named = await deadLetter(source);
    const bystander = await deadLetter(source);
    for (const body of [
      { receipt_ids: [named] },
      { receiptIds: [named], sorce: source },
      { source, sinse: "2026-01-01" },
    ]) {
      const response = await adminPost("/admin/api/dead/replay", body);
      expect(response.status, JSON.stringify(body)).toBe(400);
      const { error } = await response.json<ErrorEnvelope>();
      expect(error.code).toBe("unknown_key");
      const unknown = Object.keys(body).find((key) => !["receiptIds", "source"].includes(key))!;
      expect(error.message).toContain(`"${unknown}"`);
    }
    const { error } = await (await adminPost("/admin/api/dead/replay", { receipt_ids: [named] })).json<ErrorEnvelope>();
    expect(error.message).toContain('(did you mean "receiptIds"?)');
    expect([await statusOf(named), await statusOf(bystander)]).toEqual(["dead", "dead"]);
  });

  it("needs an explicit scope: {} and a filter without a source replay nothing", async () => {
    const slice = Date.parse("2024-02-01T00:00:00Z") + Math.floor(Math.random() * 1e9);
    const receiptId = await deadLetter(uniqueSource("strict-scope"), slice);
    for (const body of [
      {},
      { since: slice, until: slice + 1 },
      { type: "account.credited" },
      { source: "  " },
      { all: false, since: slice },
      { all: "yes" },
    ]) {
      const response = await adminPost("/admin/api/dead/replay", body);
      expect(response.status, JSON.stringify(body)).toBe(400);
      expect((await response.json<ErrorEnvelope>()).error.code).toBe("invalid_body");
    }
    expect(await statusOf(receiptId)).toBe("dead");
  });

  it("refuses contradictory scopes: ids with a filter, a source with all", async () => {
    const source = uniqueSource("strict-mixed");
    const receiptId = await deadLetter(source);
    for (const body of [
      { receiptIds: [receiptId], source },
      { receiptIds: [receiptId], all: true },
      { source, all: true },
    ]) {
      const response = await adminPost("/admin/api/dead/replay", body);
      expect(response.status, JSON.stringify(body)).toBe(400);
    }
    expect(await statusOf(receiptId)).toBe("dead");
  });

  it('replays across every source only when asked with "all": true', async () => {
    // A time slice nobody else writes to, so "all" sees exactly these two.
    const slice = Date.parse("2024-06-01T00:00:00Z") + Math.floor(Math.random() * 1e9);
    const first = await deadLetter(uniqueSource("strict-all-a"), slice);
    const second = await deadLetter(uniqueSource("strict-all-b"), slice + 1);
    const response = await adminPost("/admin/api/dead/replay", { all: true, since: slice, until: slice + 2 });
    expect(response.status).toBe(200);
    const report = await response.json<{ replayed: number; results: { receiptId: string }[] }>();
    expect(report.results.map((result) => result.receiptId).sort()).toEqual([first, second].sort());
    expect(await statusOf(first)).not.toBe("dead");
  });

  it("still replays by ids", async () => {
    const receiptId = await deadLetter(uniqueSource("strict-ids"));
    const report = await (await adminPost("/admin/api/dead/replay", { receiptIds: [receiptId, ulid()] })).json<{
      results: { outcome: string }[];
    }>();
    expect(report.results.map((result) => result.outcome)).toEqual(["replayed", "not_found"]);
  });
});
