import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it, vi } from "vitest";
import { app } from "../../src/app";
import { processBatch } from "../../src/consumers/receipts/process";
import { seedReceipt } from "../consumers/support/processing";
import { signDemo, waitForStatus } from "../support/deliveries";

/**
 * The operator's log lines, captured from console as Workers Logs would receive them: by default only what needs a
 * look (duplicates, rejections, failures, retries); with LOG_SUCCESSES = "true" also one per accepted delivery and
 * per processed attempt, with what a human needs to follow an event — and never the secret, the signature or the
 * body.
 */

type LogLine = Record<string, unknown> & { event: string };

function captureLogs() {
  const lines: string[] = [];
  const capture = (...args: unknown[]) => {
    lines.push(args.map(String).join(" "));
  };
  vi.spyOn(console, "log").mockImplementation(capture);
  vi.spyOn(console, "error").mockImplementation(capture);
  vi.spyOn(console, "warn").mockImplementation(capture);
  return {
    raw: lines,
    parsed: (): LogLine[] =>
      lines.flatMap((line) => {
        try {
          const value = JSON.parse(line) as unknown;
          return value && typeof value === "object" && "event" in value ? [value as LogLine] : [];
        } catch {
          return [];
        }
      }),
  };
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe("structured logs", () => {
  it('with LOG_SUCCESSES = "true", writes one line per delivery and per attempt with the operator\'s fields, and nothing secret', async () => {
    const verbose = { ...env, LOG_SUCCESSES: "true" } as Env;
    const logs = captureLogs();
    const eventKey = `msg_logs_${crypto.randomUUID()}`;
    const bodyMarker = `body-marker-${crypto.randomUUID()}`;
    const body = JSON.stringify({
      type: "account.credited",
      data: { account: `acct_${eventKey}`, amount: 2, note: bodyMarker },
    });
    const headers = signDemo(eventKey, body);

    const deliver = (extra: Record<string, string> = {}) =>
      app.fetch(
        new Request("https://receiver.test/webhooks/admin-logs", {
          method: "POST",
          body,
          headers: { ...headers, ...extra },
        }),
        verbose,
      );
    expect((await deliver()).status).toBe(200);
    expect((await deliver()).status).toBe(200);
    const forgedSignature = "v1,c2lnbmF0dXJlLXRoYXQtbmV2ZXItdmVyaWZpZXM=";
    expect((await deliver({ "webhook-signature": forgedSignature })).status).toBe(401);
    await waitForStatus("admin-logs", eventKey);

    const lines = logs.parsed();
    const deliveries = lines.filter((line) => line.event === "delivery" && line.eventKey === eventKey);
    expect(deliveries.map((line) => line.disposition)).toEqual(["accepted", "duplicate"]);
    for (const line of deliveries) {
      expect(line).toMatchObject({
        source: "admin-logs",
        eventKey,
        eventType: "account.credited",
        signature: "valid",
        receipt: expect.stringMatching(/^[0-9A-HJKMNP-TV-Z]{26}$/),
        requestId: expect.any(String),
        timestampAgeSeconds: expect.any(Number),
        durationMs: expect.any(Number),
      });
    }

    const rejected = lines.filter((line) => line.event === "delivery.rejected" && line.source === "admin-logs");
    expect(rejected).toHaveLength(1);
    expect(rejected[0]).toMatchObject({
      disposition: "rejected",
      signature: "signature-mismatch",
      requestId: expect.any(String),
    });

    // The consumer's line for a processed attempt, from a receipt processed under the same setting.
    const seededKey = `msg_logs_seeded_${crypto.randomUUID()}`;
    const receiptId = await seedReceipt({
      source: "admin-logs",
      eventKey: seededKey,
      eventType: "account.credited",
      payload: { type: "account.credited", data: { account: `acct_${seededKey}`, amount: 1, note: bodyMarker } },
    });
    expect((await processBatch(verbose, [receiptId])).get(receiptId)).toEqual({ kind: "done", status: "processed" });
    const attempts = logs.parsed().filter((line) => line.event === "attempt" && line.receipt === receiptId);
    expect(attempts).toEqual([
      expect.objectContaining({
        source: "admin-logs",
        eventKey: seededKey,
        eventType: "account.credited",
        receipt: receiptId,
        attempt: 1,
        outcome: "processed",
        durationMs: expect.any(Number),
      }),
    ]);
    // The route is an attribute of every attempt line, the receipt's own route too (null for a one-route source),
    // so an OTLP backend can group attempts by source and route alike.
    expect(attempts[0]).toHaveProperty("route");

    const everything = logs.raw.join("\n");
    const secret = env.DEMO_WEBHOOK_SECRET;
    for (const forbidden of [
      secret,
      secret.replace(/^whsec_/, ""),
      headers["webhook-signature"],
      forgedSignature,
      bodyMarker,
      body,
    ]) {
      expect(everything).not.toContain(forbidden);
    }
    // Every line is a single JSON object: nothing free-form for a payload to hide in.
    for (const line of logs.raw.filter((text) => text.includes(eventKey))) {
      expect(() => JSON.parse(line)).not.toThrow();
    }
  });

  it("by default (LOG_SUCCESSES unset), logs only what needs a look: no line for a first acceptance or a processed attempt", async () => {
    const quiet = { ...env } as Env;
    expect((quiet as { LOG_SUCCESSES?: string }).LOG_SUCCESSES).toBeUndefined();
    const logs = captureLogs();
    const eventKey = `msg_quiet_${crypto.randomUUID()}`;
    const body = JSON.stringify({ type: "account.credited", data: { account: `acct_${eventKey}`, amount: 1 } });
    const headers = signDemo(eventKey, body);
    const deliver = (extra: Record<string, string> = {}) =>
      app.fetch(
        new Request("https://receiver.test/webhooks/admin-logs", {
          method: "POST",
          body,
          headers: { ...headers, ...extra },
        }),
        quiet,
      );

    expect((await deliver()).status).toBe(200);
    expect((await deliver()).status).toBe(200);
    expect((await deliver({ "webhook-signature": "v1,c2lnbmF0dXJlLXRoYXQtbmV2ZXItdmVyaWZpZXM=" })).status).toBe(401);
    const deliveries = logs.parsed().filter((line) => line.eventKey === eventKey && line.event === "delivery");
    expect(deliveries.map((line) => line.disposition)).toEqual(["duplicate"]);
    expect(
      logs.parsed().filter((line) => line.event === "delivery.rejected" && line.source === "admin-logs"),
    ).toHaveLength(1);

    // A processed attempt is silent too; the receipt itself still records it.
    const seededKey = `msg_quiet_seeded_${crypto.randomUUID()}`;
    const receiptId = await seedReceipt({
      source: "admin-logs",
      eventKey: seededKey,
      eventType: "account.credited",
      payload: { type: "account.credited", data: { account: `acct_${seededKey}`, amount: 1 } },
    });
    const outcomes = await processBatch(quiet, [receiptId]);
    expect(outcomes.get(receiptId)).toEqual({ kind: "done", status: "processed" });
    expect(logs.parsed().filter((line) => line.event === "attempt" && line.receipt === receiptId)).toEqual([]);
    const row = await env.DB.prepare("SELECT status FROM receipts WHERE id = ?")
      .bind(receiptId)
      .first<{ status: string }>();
    expect(row).toEqual({ status: "processed" });
  });
});
