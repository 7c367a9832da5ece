import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { processReceipt } from "../../src/consumers/receipts/process";
import { MAX_BODY_ITEMS } from "../../src/routing/body-bounds";
import { MAX_REGEX_SUBJECT_CHARS } from "../../src/routing/regex";
import { MAX_ROUTE_STEPS } from "../../src/routing/steps";
import { attemptRows, envWithSources, receiptRow, seedReceipt, standinRequests } from "../consumers/support/processing";

/**
 * A route's bounds through the real consumer (processReceipt over real D1 and the forward stand-in): a body past
 * a bound, or rules that would run past their budget on it, end the delivery dead on its first attempt, with the
 * bound as its reason and nothing sent, instead of a CPU-limit crash the queue would retry.
 */

const slack = (env.SOURCES as Record<string, Record<string, unknown>>)["routing-slack"]!;
const destination = (slack.routes as Record<string, unknown>[])[0]!.destination;
const bounded = envWithSources({
  "routing-bounded": {
    provider: "standard-webhooks",
    secrets: ["DEMO_WEBHOOK_SECRET"],
    type_path: "type",
    routes: [
      {
        name: "bounded",
        destination,
        schema: { properties: { data: { properties: { note: { type: "string", pattern: "^[a-z ]+$" } } } } },
        transform: '{ "distinct": $distinct(data.items) }',
      },
    ],
  },
});

async function processed(data: Record<string, unknown>) {
  const receiptId = await seedReceipt({
    source: "routing-bounded",
    payload: { type: "account.credited", data },
    eventType: "account.credited",
  });
  return { receiptId, verdict: await processReceipt(bounded, receiptId) };
}

async function expectDead(receiptId: string, lastError: string | RegExp) {
  const row = await receiptRow(receiptId);
  expect(row.status).toBe("dead");
  if (typeof lastError === "string") expect(row.lastError).toBe(lastError);
  else expect(row.lastError).toMatch(lastError);
  expect(await attemptRows(receiptId)).toMatchObject([{ outcome: "dead" }]);
  expect(await standinRequests(receiptId)).toEqual([]);
}

const numbers = (count: number) => Array.from({ length: count }, (_, index) => index % 7);

describe("a route's bounds on the consumer path", () => {
  it("delivers a body within every bound, transformed", async () => {
    const { receiptId, verdict } = await processed({ items: numbers(100), note: "fine words" });
    expect(verdict).toEqual({ kind: "done", status: "processed" });
    expect((await standinRequests(receiptId)).map((request) => request.body)).toEqual(['{"distinct":[0,1,2,3,4,5,6]}']);
  });

  it("ends dead, not retried, when the transform would take more steps than the budget", async () => {
    // All distinct: $distinct compares each with every one kept before it.
    const { receiptId, verdict } = await processed({ items: Array.from({ length: 8000 }, (_, index) => index) });
    expect(verdict).toEqual({ kind: "done", status: "dead" });
    await expectDead(
      receiptId,
      `transform failed: it took more than ${MAX_ROUTE_STEPS} steps on this event (the bound on a route's work per event)`,
    );
  });

  it("ends dead when the body holds a list longer than the rules read", async () => {
    const { receiptId, verdict } = await processed({ items: numbers(MAX_BODY_ITEMS + 1) });
    expect(verdict).toEqual({ kind: "done", status: "dead" });
    await expectDead(
      receiptId,
      `body over the bounds of route bounded: body.data.items is a list of ${MAX_BODY_ITEMS + 1} items, over the ${MAX_BODY_ITEMS} a route's rules read`,
    );
  });

  it("ends dead when a schema pattern would read a string past the regex subject bound", async () => {
    const { receiptId, verdict } = await processed({ items: [], note: "a".repeat(MAX_REGEX_SUBJECT_CHARS + 1) });
    expect(verdict).toEqual({ kind: "done", status: "dead" });
    await expectDead(
      receiptId,
      `schema mismatch on route bounded: #/data/note: a string over ${MAX_REGEX_SUBJECT_CHARS} characters, more than a pattern or format reads`,
    );
  });
});
