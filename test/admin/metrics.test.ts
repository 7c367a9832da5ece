import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { readDeliveryMetrics } from "../../src/admin/stats/analytics-query";
import { sourceStats } from "../../src/admin/stats/stats";
import { app } from "../../src/app";
import { recordAttempt } from "../../src/lib/analytics";
import {
  type DeliveryTally,
  TALLY_SIZE,
  TALLY_WINDOW_MS,
  type TalliedPoint,
  tallyDelivery,
} from "../../src/lib/delivery-tally";
import { credit, signDemo } from "../support/deliveries";
import { uniqueSource } from "./support";

/** A stand-in for the Analytics Engine binding that keeps what was written. */
function fakeDataset() {
  const points: AnalyticsEngineDataPoint[] = [];
  return {
    points,
    dataset: {
      writeDataPoint: (point?: AnalyticsEngineDataPoint) => void points.push(point ?? {}),
    } as AnalyticsEngineDataset,
  };
}

describe("metrics export to Analytics Engine", () => {
  it("writes a point per refused delivery and one per 25 answered 200, counting them, without secrets, signatures or bodies", async () => {
    const { points, dataset } = fakeDataset();
    const bound = { ...env, METRICS: dataset } as unknown as Env;
    const eventKeys = Array.from({ length: TALLY_SIZE }, () => `msg_metrics_${crypto.randomUUID()}`);
    const signed = eventKeys.map((eventKey) => {
      const body = JSON.stringify(credit(`acct_${eventKey}`, 1));
      return { eventKey, body, headers: signDemo(eventKey, body) };
    });
    const deliver = ({ body, headers }: (typeof signed)[number], extra: Record<string, string> = {}) =>
      app.fetch(
        new Request("https://receiver.test/webhooks/admin-audit", {
          method: "POST",
          body,
          headers: { ...headers, ...extra },
        }),
        bound,
      );
    const first = signed[0]!;
    expect((await deliver(first)).status).toBe(200);
    expect((await deliver(first)).status).toBe(200);
    expect((await deliver(first, { "webhook-signature": "v1,AAAA" })).status).toBe(401);
    // The refusal is a point at once; the acceptance and the duplicate wait in their tallies.
    expect(points.map((point) => point.blobs?.slice(0, 4))).toEqual([
      ["delivery", "admin-audit", "rejected", expect.stringMatching(/signature/)],
    ]);
    expect(points[0]!.doubles?.[1]).toBe(1);

    const answers = await Promise.all(signed.slice(1).map((delivery) => deliver(delivery)));
    expect(answers.map((answer) => answer.status)).toEqual(Array(TALLY_SIZE - 1).fill(200));
    expect(points.map((point) => [...(point.blobs ?? []).slice(0, 3), point.doubles?.[1]])).toEqual([
      ["delivery", "admin-audit", "rejected", 1],
      ["delivery", "admin-audit", "accepted", TALLY_SIZE],
    ]);
    const [, accepted] = points;
    const [sampleMs, , maxMs] = accepted!.doubles ?? [];
    expect(sampleMs).toBeGreaterThanOrEqual(0);
    expect(maxMs).toBeGreaterThanOrEqual(sampleMs!);
    for (const point of points) {
      expect(point.indexes).toEqual(["admin-audit"]);
      const written = JSON.stringify(point);
      for (const { eventKey, body, headers } of signed)
        for (const secretish of [env.DEMO_WEBHOOK_SECRET, headers["webhook-signature"], "v1,AAAA", body, eventKey])
          expect(written).not.toContain(secretish);
    }
  });

  it("closes a tally at 25 deliveries, or at the first delivery a minute after it opened, keeping the slowest", () => {
    let tally: DeliveryTally | undefined;
    const written: TalliedPoint[] = [];
    const start = 1_000_000;
    for (let index = 0; index < 2 * TALLY_SIZE; index++) {
      const step = tallyDelivery(tally, index === 3 ? 900 : 10 + index, start + index);
      tally = step.tally;
      if (step.point) written.push(step.point);
    }
    expect(written).toEqual([
      { count: TALLY_SIZE, sampleMs: 10 + TALLY_SIZE - 1, maxMs: 900 },
      { count: TALLY_SIZE, sampleMs: 10 + 2 * TALLY_SIZE - 1, maxMs: 10 + 2 * TALLY_SIZE - 1 },
    ]);
    expect(tally).toBeUndefined();
    // A quiet source: three deliveries, the third a minute after the first, close their tally with a count of 3.
    const quiet = [start, start + 30_000, start + TALLY_WINDOW_MS].reduce<{
      tally: DeliveryTally | undefined;
      point: TalliedPoint | null;
    }>((step, at) => tallyDelivery(step.tally, 5, at), { tally: undefined, point: null });
    expect(quiet).toEqual({ tally: undefined, point: { count: 3, sampleMs: 5, maxMs: 5 } });
    expect(tallyDelivery(undefined, 5, start, TALLY_SIZE, TALLY_WINDOW_MS).point).toBeNull();
  });

  it("writes nothing and fails nothing when the dataset is not bound, or when writing throws", async () => {
    expect(() =>
      recordAttempt(env, { source: "s", outcome: "processed", httpStatus: null, durationMs: 3, attempt: 1 }),
    ).not.toThrow();
    const broken = {
      METRICS: {
        writeDataPoint: () => {
          throw new Error("quota");
        },
      },
    };
    expect(() =>
      recordAttempt(broken, { source: "s", outcome: "retry", httpStatus: 503, durationMs: 3, attempt: 2 }),
    ).not.toThrow();
    const { points, dataset } = fakeDataset();
    recordAttempt(
      { METRICS: dataset },
      { source: "s", outcome: "retry", httpStatus: 503, durationMs: 840, attempt: 2 },
    );
    expect(points).toEqual([{ indexes: ["s"], blobs: ["attempt", "s", "retry", "503"], doubles: [840, 2] }]);
  });

  it("reads rejected deliveries and ack latency back through the SQL API, and the stats say they came from there", async () => {
    const source = uniqueSource("metrics");
    const hour = Math.floor(Date.now() / 3_600_000) * 3_600_000;
    const hourText = new Date(hour).toISOString().slice(0, 19).replace("T", " ");
    const sent: string[] = [];
    const fetcher = (async (_url: string, init: RequestInit) => {
      const text = String(init.body);
      sent.push(text);
      const data = text.includes("blob3 = 'rejected'")
        ? [{ source, hour: hourText, rejected: 4 }]
        : text.includes("AS hour")
          ? [{ source, hour: hourText, deliveries: 10, p50: 12, p95: 30, p99: 41, max: 55 }]
          : [{ source, deliveries: 10, p50: 12, p95: 30, p99: 41, max: 55 }];
      return Response.json({ data });
    }) as unknown as typeof fetch;
    const bound = {
      ...env,
      METRICS: fakeDataset().dataset,
      METRICS_ACCOUNT_ID: "0123456789abcdef",
      METRICS_API_TOKEN: "token-for-the-test",
    };
    const readout = (await readDeliveryMetrics(bound, 24 * 3_600_000, source, fetcher))!;
    expect(sent).toHaveLength(3);
    expect(sent.every((text) => text.includes(`index1 = '${source}'`) && text.endsWith("FORMAT JSON"))).toBe(true);
    // A point counts double2 deliveries: counts sum it, never the points; the maximum is the slowest each counted.
    expect(sent.every((text) => text.includes("SUM(_sample_interval * double2)"))).toBe(true);
    expect(sent.some((text) => /SUM\(_sample_interval\)|MAX\(double1\)/.test(text))).toBe(false);
    expect(readout.totals.rejectedSignatures.get(source)).toBe(4);
    expect(readout.hourly.get(source)?.get(hour)).toEqual({ rejected: 4, ackP50: 12, ackP95: 30 });
    expect(readout.totals.ackLatencyMs.get(source)).toEqual({ samples: 10, p50: 12, p95: 30, p99: 41, max: 55 });

    const report = await sourceStats(bound as unknown as Env, 24 * 3_600_000, {
      onlySource: source,
      metrics: readout.totals,
    });
    expect(report.origins).toMatchObject({
      rejectedSignatures: "analytics-engine",
      ackLatencyMs: "analytics-engine",
      counts: "d1",
    });
    // Nothing of this source is in D1, so the report has no row for it: the numbers are checked on the readout.
    expect(await readDeliveryMetrics({ ...env }, 3_600_000, source, fetcher)).toBeNull();
  });
});

describe("rejected deliveries under wrangler dev", () => {
  const stats = async (bound: Env) =>
    (await (
      await app.fetch(
        new Request("https://receiver.test/admin/api/stats?source=admin-audit", {
          headers: { authorization: `Bearer ${env.ADMIN_TOKEN}` },
        }),
        bound,
      )
    ).json()) as {
      origins: { rejectedSignatures: string };
      sources: { rejectedSignatures: number | null }[];
    };
  const forged = (bound: Env) => {
    const eventKey = `msg_forged_${crypto.randomUUID()}`;
    const body = JSON.stringify(credit(`acct_${eventKey}`, 1));
    const headers = { ...signDemo(eventKey, body), "webhook-signature": "v1,AAAA" };
    return app.fetch(
      new Request("https://receiver.test/webhooks/admin-audit", { method: "POST", body, headers }),
      bound,
    );
  };

  it("are counted in the dev server's memory, reported by the stats, and never counted by a deployed Worker", async () => {
    const local = { ...env, LOCAL_DEVELOPMENT: "true" } as unknown as Env;
    const before = (await stats(local)).sources[0]!.rejectedSignatures ?? 0;
    expect((await forged(local)).status).toBe(401);
    expect((await forged(local)).status).toBe(401);
    const after = await stats(local);
    expect(after.origins.rejectedSignatures).toBe("dev-server-memory");
    expect(after.sources[0]!.rejectedSignatures).toBe(before + 2);
    // The source page charts them, saying where they come from instead of asking to bind METRICS.
    const session = (
      await app.fetch(
        new Request("https://receiver.test/admin/login", {
          method: "POST",
          body: new URLSearchParams({ token: env.ADMIN_TOKEN }),
          headers: { "content-type": "application/x-www-form-urlencoded", origin: "https://receiver.test" },
        }),
        local,
      )
    ).headers
      .get("set-cookie")!
      .split(";")[0]!;
    const html = await (
      await app.fetch(
        new Request("https://receiver.test/admin/sources/admin-audit", { headers: { cookie: session } }),
        local,
      )
    ).text();
    const chart = /id="chart-rejected" data-total="(\d+)"[\s\S]*?<\/figure>/.exec(html);
    expect(Number(chart?.[1])).toBe(before + 2);
    expect(chart?.[0]).toContain("Counted by this dev server since it started");
    expect(chart?.[0]).not.toContain("Bind the METRICS");

    // Without LOCAL_DEVELOPMENT (every deployed Worker) nothing is kept, and the stats say it is not stored.
    expect((await forged(env)).status).toBe(401);
    const deployed = await stats(env);
    expect(deployed.origins.rejectedSignatures).toBe("not-stored");
    expect(deployed.sources[0]!.rejectedSignatures).toBeNull();
    expect((await stats(local)).sources[0]!.rejectedSignatures).toBe(before + 2);
  });
});
