import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { app } from "../../src/app";
import { receiptDatabaseBindings } from "../../src/sources/databases";
import { sourcesHealth } from "../../src/sources/registry";
import { credit, eventually, post, signDemo } from "../support/deliveries";

/**
 * Past one database: a source whose table says `database = "DB_SECOND"` keeps its receipts and its handler's
 * effects in that database, through the real route, shard, relay, queue and consumer; `DB` never sees them.
 */

function deliverTo(source: string, webhookId: string, payload: unknown): Promise<Response> {
  const body = JSON.stringify(payload);
  return post(`/webhooks/${source}`, body, signDemo(webhookId, body));
}

async function statusIn(database: D1Database, source: string, eventKey: string): Promise<string | undefined> {
  const row = await database
    .prepare("SELECT status FROM receipts WHERE source = ? AND event_key = ?")
    .bind(source, eventKey)
    .first<{ status: string }>();
  return row?.status;
}

async function creditsIn(database: D1Database, accountId: string): Promise<number | undefined> {
  const row = await database
    .prepare("SELECT credits FROM accounts WHERE id = ?")
    .bind(accountId)
    .first<{ credits: number }>();
  return row?.credits;
}

describe("a source on its own database", () => {
  it("stores its receipts and applies its handler's effects in that database, once each, under concurrent duplicates", async () => {
    const keys = Array.from({ length: 12 }, (_, index) => `msg_split_${index}`);
    // Every event delivered three times at once: the shard admits one of each, the others answer as duplicates.
    const answers = await Promise.all(
      keys.flatMap((key) => [1, 2, 3].map(() => deliverTo("second-db", key, credit("acct_split", 5)))),
    );
    expect(answers.every((answer) => answer.status === 200)).toBe(true);

    for (const key of keys) {
      await eventually(
        async () => ((await statusIn(env.DB_SECOND, "second-db", key)) === "processed" ? true : undefined),
        20_000,
        `${key} processed in DB_SECOND`,
      );
      expect(await statusIn(env.DB, "second-db", key)).toBeUndefined();
    }
    const { count } = (await env.DB_SECOND.prepare(
      "SELECT COUNT(*) AS count FROM receipts WHERE source = 'second-db' AND event_key LIKE 'msg_split_%'",
    ).first<{ count: number }>())!;
    expect(count).toBe(keys.length);
    // Each credit applied exactly once, in the source's database; the default database has no such account.
    expect(await creditsIn(env.DB_SECOND, "acct_split")).toBe(5 * keys.length);
    expect(await creditsIn(env.DB, "acct_split")).toBeUndefined();
  });

  it("lists every database that may hold receipts: DB first, then every other D1 binding", () => {
    expect(receiptDatabaseBindings(env)).toEqual(["DB", "DB_P0", "DB_P1", "DB_P2", "DB_P3", "DB_SECOND"]);
  });

  it("refuses, alone, a source that names a database the Worker has no binding for", async () => {
    const withMissing = {
      ...env,
      SOURCES: {
        ...(env.SOURCES as Record<string, unknown>),
        "nowhere-db": {
          provider: "standard-webhooks",
          secrets: ["DEMO_WEBHOOK_SECRET"],
          destination: "none",
          database: "DB_MISSING",
        },
      },
    } as Env;
    const health = sourcesHealth(withMissing);
    expect(health.invalid["nowhere-db"]?.join(" ")).toMatch(/database "DB_MISSING" is not a D1 binding/);
    expect(health.valid).toContain("second-db");

    const body = JSON.stringify(credit("acct_nowhere", 1));
    const refused = await app.fetch(
      new Request("https://receiver.test/webhooks/nowhere-db", {
        method: "POST",
        body,
        headers: signDemo("msg_nowhere", body),
      }),
      withMissing,
    );
    expect(refused.status).toBe(503);
    const accepted = await app.fetch(
      new Request("https://receiver.test/webhooks/second-db", {
        method: "POST",
        body,
        headers: signDemo("msg_nowhere_ok", body),
      }),
      withMissing,
    );
    expect(accepted.status).toBe(200);
  });

  it("refuses a database key that is not a binding name", () => {
    const badName = {
      ...env,
      SOURCES: {
        "bad-db-name": { provider: "standard-webhooks", secrets: ["DEMO_WEBHOOK_SECRET"], database: "receipts eu" },
      },
    } as Env;
    expect(sourcesHealth(badName).invalid["bad-db-name"]?.join(" ")).toMatch(/database must name a D1 binding/);
  });
});
