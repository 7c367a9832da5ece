import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { moveDeadLetters } from "../../src/admin/actions/dismiss";
import { replayReceipt } from "../../src/replay/replay-receipts";
import { parseSource } from "../../src/sources/config";
import { adminGet } from "../admin/support";
import { standinRequests } from "../consumers/support/processing";
import { runCron } from "../reconcile/support";
import { eventually, post, signDemo, waitForStatus } from "../support/deliveries";

/**
 * Large bodies through the real route, relay, queue consumer, admin API, replay and retention, with the BODIES
 * bucket that wrangler.toml binds (R2 simulated locally by the same runtime that runs D1 and the shards).
 */

const LARGE = "bodies-r2"; // default threshold (64 KB), forwards 404 then 204, payload retention 1h
const SMALL_THRESHOLD = "bodies-r2-small"; // r2_body_threshold = 16, destination none

/** About 100 KB of JSON with multi-byte characters, so "byte-exact" means something. */
function largeBody(tag: string): string {
  return JSON.stringify({
    type: "report.ready",
    data: { tag, rows: Array.from({ length: 1500 }, (_, index) => `ligne ${index} — café ☕ ${tag}`) },
  });
}

async function row(source: string, eventKey: string) {
  return env.DB.prepare(
    "SELECT id AS receiptId, body IS NOT NULL AS bodyInRow, body_location AS bodyLocation, kept_headers AS keptHeaders FROM receipts WHERE source = ? AND event_key = ?",
  )
    .bind(source, eventKey)
    .first<{ receiptId: string; bodyInRow: number; bodyLocation: string | null; keptHeaders: string | null }>();
}

async function stored(receiptId: string): Promise<{ bytes: Uint8Array; metadata: Record<string, string> } | null> {
  const object = await env.BODIES.get(receiptId);
  return object ? { bytes: new Uint8Array(await object.arrayBuffer()), metadata: object.customMetadata ?? {} } : null;
}

describe("bodies above the threshold live in R2", () => {
  it("are stored byte-exact, forwarded, shown, replayed and removed by retention", { timeout: 120_000 }, async () => {
    const tag = crypto.randomUUID();
    const eventKey = `msg_large_${tag}`;
    const body = largeBody(tag);
    const bytes = new TextEncoder().encode(body);
    expect(bytes.byteLength).toBeGreaterThan(64 * 1024);
    expect((await post(`/webhooks/${LARGE}`, body, signDemo(eventKey, body))).status).toBe(200);

    // The first forward meets a 404: dead, after the consumer read the body back from R2 and sent it.
    expect(await waitForStatus(LARGE, eventKey, ["dead"])).toBe("dead");
    const receipt = (await row(LARGE, eventKey))!;
    expect(receipt).toMatchObject({ bodyInRow: 0, bodyLocation: "r2" });
    expect(JSON.parse(receipt.keptHeaders!)).toMatchObject({ "content-type": "application/json" });
    const object = (await stored(receipt.receiptId))!;
    expect(object.bytes).toEqual(bytes);
    expect(object.metadata).toMatchObject({ source: LARGE, eventKey, keptHeaders: receipt.keptHeaders });

    // Admin API: the body as it arrived, with its kept headers.
    const detail = await (await adminGet(`/admin/api/receipts/${receipt.receiptId}`)).json<{
      receipt: {
        body: { encoding: string; text: string };
        bodyRetained: boolean;
        bodyLocation: string;
        keptHeaders: Record<string, string>;
      };
    }>();
    expect(detail.receipt).toMatchObject({
      body: { encoding: "utf8", text: body },
      bodyRetained: true,
      bodyLocation: "r2",
    });
    expect(detail.receipt.keptHeaders).toEqual(JSON.parse(receipt.keptHeaders!));

    // Replay: processed by the second forward, which carries the same bytes.
    expect((await replayReceipt(env, receipt.receiptId)).kind).toBe("replayed");
    expect(await waitForStatus(LARGE, eventKey, ["processed"])).toBe("processed");
    const forwards = await standinRequests(receipt.receiptId);
    expect(forwards.map((request) => request.answer)).toEqual([404, 204]);
    expect(forwards.every((request) => request.body === body)).toBe(true);

    // Past payload retention (1h), the cron drops the body: the object and the marker go together.
    const onlyThisSource = { ...env, SOURCES: { [LARGE]: (env.SOURCES as Record<string, unknown>)[LARGE] } } as Env;
    const later = Date.now() + 2 * 3_600_000;
    await eventually(
      async () => {
        await runCron(later, onlyThisSource);
        return (await row(LARGE, eventKey))?.bodyLocation === null ? true : undefined;
      },
      60_000,
      "retention to drop the R2 body",
    );
    expect(await stored(receipt.receiptId)).toBeNull();
    expect(await row(LARGE, eventKey)).toMatchObject({ bodyInRow: 0, bodyLocation: null, keptHeaders: null });
    const after = await (await adminGet(`/admin/api/receipts/${receipt.receiptId}`)).json<{
      receipt: { body: unknown; bodyRetained: boolean };
    }>();
    expect(after.receipt).toMatchObject({ body: null, bodyRetained: false });
    expect((await replayReceipt(env, receipt.receiptId)).kind).toBe("payload_expired");
  });

  it("keeps a dead letter's body in R2 past payload retention, until it is dismissed", {
    timeout: 120_000,
  }, async () => {
    const tag = crypto.randomUUID();
    const eventKey = `msg_large_dead_${tag}`;
    const body = largeBody(tag);
    expect((await post(`/webhooks/${LARGE}`, body, signDemo(eventKey, body))).status).toBe(200);
    expect(await waitForStatus(LARGE, eventKey, ["dead"])).toBe("dead");
    const receipt = (await row(LARGE, eventKey))!;
    expect(receipt.bodyLocation).toBe("r2");

    // Past payload retention (1h): a dead letter keeps its object, for its key's lifetime (no dead_letter_retention set).
    const onlyThisSource = { ...env, SOURCES: { [LARGE]: (env.SOURCES as Record<string, unknown>)[LARGE] } } as Env;
    const later = Date.now() + 2 * 3_600_000;
    await runCron(later, onlyThisSource);
    expect(await row(LARGE, eventKey)).toMatchObject({ bodyLocation: "r2" });
    expect((await stored(receipt.receiptId))!.bytes).toEqual(new TextEncoder().encode(body));
    const detail = await (await adminGet(`/admin/api/receipts/${receipt.receiptId}`)).json<{
      receipt: { receivedAt: number; bodyDropsAt: number };
    }>();
    expect(detail.receipt.bodyDropsAt).toBe(detail.receipt.receivedAt + 35 * 86_400_000);

    // Dismissed: the object and the marker go at the next run, payload retention being long past.
    expect((await moveDeadLetters(env, "dismiss", [receipt.receiptId])).changed).toEqual([receipt.receiptId]);
    await eventually(
      async () => {
        await runCron(later + 1, onlyThisSource);
        return (await row(LARGE, eventKey))?.bodyLocation === null ? true : undefined;
      },
      60_000,
      "retention to drop the dismissed dead letter's R2 body",
    );
    expect(await stored(receipt.receiptId)).toBeNull();
  });

  it("keeps a body at or under the threshold in the D1 row, and honours a source's own threshold", async () => {
    const tag = crypto.randomUUID();
    const underDefault = `msg_small_${tag}`;
    const smallBody = JSON.stringify({ type: "report.ready", data: { tag } });
    expect((await post(`/webhooks/${LARGE}`, smallBody, signDemo(underDefault, smallBody))).status).toBe(200);
    const overOwn = `msg_own_${tag}`;
    expect((await post(`/webhooks/${SMALL_THRESHOLD}`, smallBody, signDemo(overOwn, smallBody))).status).toBe(200);

    await waitForStatus(LARGE, underDefault, ["dead"]);
    await waitForStatus(SMALL_THRESHOLD, overOwn, ["skipped", "processed"]);
    const inRow = (await row(LARGE, underDefault))!;
    expect(inRow).toMatchObject({ bodyInRow: 1, bodyLocation: null });
    expect(await stored(inRow.receiptId)).toBeNull();
    const inR2 = (await row(SMALL_THRESHOLD, overOwn))!;
    expect(inR2).toMatchObject({ bodyInRow: 0, bodyLocation: "r2" });
    expect((await stored(inR2.receiptId))!.bytes).toEqual(new TextEncoder().encode(smallBody));
  });

  it("refuses a malformed r2_body_threshold like any other bad setting", () => {
    const context = { knownProviders: new Set(["standard-webhooks"]), knownHandlers: new Set<string>() };
    const table = (threshold: unknown) => ({
      provider: "standard-webhooks",
      secrets: ["DEMO_WEBHOOK_SECRET"],
      r2_body_threshold: threshold,
    });
    expect(parseSource("big-bodies", table("64KB"), context)).toEqual({
      ok: false,
      problems: [expect.stringMatching(/r2_body_threshold must be a whole number of bytes/)],
    });
    expect(parseSource("big-bodies", table(-1), context).ok).toBe(false);
    expect(parseSource("big-bodies", table(0), context).ok).toBe(true);
  });
});
