import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { HOUR_MS, hourlySeries } from "../../src/admin/stats/series";
import { database } from "../../src/db/client";
import { seedAttempt, seedReceipt, uniqueSource } from "./support";

describe("hourly series for the charts", () => {
  it("buckets arrivals, outcomes and latency percentiles per hour, for 24 whole hours ending with the current one", async () => {
    const source = uniqueSource("series");
    const now = Date.now();
    const thisHour = Math.floor(now / HOUR_MS) * HOUR_MS;
    const earlier = thisHour - 3 * HOUR_MS + 60_000;
    // First-try successes: the attempt lives in the receipt row.
    await seedReceipt({
      source,
      receivedAt: earlier,
      status: "processed",
      processedAt: earlier + 400,
      leaseGeneration: 1,
      attemptStartedAt: earlier + 100,
      attemptDurationMs: 300,
    });
    await seedReceipt({
      source,
      receivedAt: earlier + 1,
      status: "processed",
      processedAt: earlier + 700,
      leaseGeneration: 1,
      attemptStartedAt: earlier + 201,
      attemptDurationMs: 499,
    });
    // A failure then a success: pickup from attempt row 1.
    const retried = await seedReceipt({
      source,
      receivedAt: thisHour + 5,
      status: "processed",
      processedAt: thisHour + 9_000,
      leaseGeneration: 2,
      attemptStartedAt: thisHour + 8_000,
      attemptDurationMs: 1000,
    });
    await seedAttempt({
      receiptId: retried,
      attemptNumber: 1,
      startedAt: thisHour + 55,
      finishedAt: thisHour + 80,
      outcome: "retry",
      durationMs: 25,
    });
    // Dead at its last attempt's end.
    const dead = await seedReceipt({
      source,
      receivedAt: earlier + 2,
      status: "dead",
      leaseGeneration: 1,
      attemptStartedAt: thisHour + 10,
      attemptDurationMs: 5,
    });
    await seedAttempt({
      receiptId: dead,
      attemptNumber: 1,
      startedAt: earlier + 50,
      finishedAt: thisHour + 15,
      outcome: "dead",
      durationMs: 5,
    });
    // Older than the span: left out.
    await seedReceipt({
      source,
      receivedAt: thisHour - 30 * HOUR_MS,
      status: "processed",
      processedAt: thisHour - 30 * HOUR_MS + 10,
    });

    const points = (await hourlySeries(database(env), { onlySource: source, now })).get(source)!;
    expect(points).toHaveLength(24);
    expect(points.at(-1)!.hour).toBe(thisHour);
    expect(points[0]!.hour).toBe(thisHour - 23 * HOUR_MS);
    const at = (hour: number) => points.find((point) => point.hour === hour)!;
    expect(at(thisHour - 3 * HOUR_MS)).toMatchObject({
      received: 3,
      processed: 2,
      dead: 0,
      pickupP50: 100,
      pickupP95: 200,
      processingP50: 300,
      processingP95: 499,
    });
    expect(at(thisHour)).toMatchObject({
      received: 1,
      processed: 1,
      dead: 1,
      pickupP50: 50,
      processingP50: 1000,
      rejected: null,
    });
    expect(points.reduce((total, point) => total + point.received, 0)).toBe(4);
  });
});
