import { env } from "cloudflare:workers";
import { eq, sql } from "drizzle-orm";
import { describe, expect, it } from "vitest";
import { receipts } from "../../src/db/schema";
import { placeholder, statementTemplate } from "../../src/db/statement-template";
import { seedReceipt } from "./support/processing";

/**
 * The consumer's commit updates are built once per isolate and bound per receipt (`statementTemplate`). What must
 * hold: each binding carries its own values, one build serves every binding, and a value left unbound is refused
 * before anything reaches D1.
 */

const markError = statementTemplate((db) =>
  db
    .update(receipts)
    .set({ lastError: placeholder("note"), attempts: sql`${receipts.attempts} + ${placeholder("extra")}` })
    .where(eq(receipts.receiptId, placeholder("receiptId"))),
);

async function row(receiptId: string) {
  return env.DB.prepare("SELECT last_error AS lastError, attempts FROM receipts WHERE id = ?")
    .bind(receiptId)
    .first<{ lastError: string | null; attempts: number }>();
}

describe("statementTemplate", () => {
  it("binds each use's own values, in one batch, with one build", async () => {
    const first = await seedReceipt({ source: "demo", payload: { n: 1 } });
    const second = await seedReceipt({ source: "demo", payload: { n: 2 } });
    const statements = [
      markError(env.DB, { receiptId: first, note: "first note", extra: 2 }),
      markError(env.DB, { receiptId: second, note: "second note", extra: 5 }),
    ];
    const results = await env.DB.batch(statements);
    expect(results.map((result) => result.meta.changes)).toEqual([1, 1]);
    expect(await row(first)).toEqual({ lastError: "first note", attempts: 2 });
    expect(await row(second)).toEqual({ lastError: "second note", attempts: 5 });
  });

  it("refuses a use that leaves a placeholder unbound, before D1 sees it", async () => {
    const receiptId = await seedReceipt({ source: "demo", payload: { n: 3 } });
    expect(() => markError(env.DB, { receiptId, note: "no extra" })).toThrow(/extra/);
    expect(await row(receiptId)).toEqual({ lastError: null, attempts: 0 });
  });

  it("builds the statement once, on first use, whatever the binding", async () => {
    let builds = 0;
    const counted = statementTemplate((db) => {
      builds += 1;
      return db
        .update(receipts)
        .set({ lastError: placeholder("note") })
        .where(eq(receipts.receiptId, placeholder("receiptId")));
    });
    expect(builds).toBe(0);
    const receiptId = await seedReceipt({ source: "demo", payload: { n: 4 } });
    await counted(env.DB, { receiptId, note: "a" }).run();
    await counted(env.DB, { receiptId, note: "b" }).run();
    expect(builds).toBe(1);
    expect((await row(receiptId))?.lastError).toBe("b");
  });
});
