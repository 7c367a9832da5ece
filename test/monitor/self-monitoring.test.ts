import { runDurableObjectAlarm } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { Webhook } from "standardwebhooks";
import { describe, expect, it } from "vitest";
import { shardFor } from "../../src/claims/routing";
import { cronObservations, D1_CAP_BYTES, nextState } from "../../src/monitor/conditions";
import { healthAnswer } from "../../src/monitor/health-answer";
import { systemMonitor } from "../../src/monitor/report";
import { adminGet } from "../admin/support";
import { runCron, standInRequests } from "../reconcile/support";
import { credit, deliverDemo, eventually, waitForStatus } from "../support/deliveries";
import { breakShardBindings, relayFailures, unreachableD1, unreachableQueue } from "../support/failpoints";

/**
 * Self-monitoring without D1: a claim shard whose D1 is unreachable (the binding fails the way an outage does)
 * tells the system monitor, which sends one signed notice through ALERT_WEBHOOK_URL (the reconcile stand-in's
 * alert sink, test/fixtures/secrets/reconcile.json), however many relays fail; /health says why; once D1 is back
 * the incident resolves, is announced once more, and lands in D1's alerts table.
 */

async function health(): Promise<{ status: string; reasons?: string[] }> {
  return (await exports.default.fetch(new Request("https://receiver.test/health"))).json();
}

async function noticesFor(alertId: string) {
  const signer = new Webhook(env.GATEWAY_SIGNING_SECRET);
  return (await standInRequests("alerts"))
    .filter((request) => request.headers["webhook-id"]?.startsWith(`${alertId}.`))
    .map(
      (request) =>
        signer.verify(request.body, request.headers) as { type: string; data: { kind: string; source: string | null } },
    );
}

describe("alerts that work when D1 does not", () => {
  it("sends one notice for an unreachable D1 across failed relays, says degraded, and records and resolves it once D1 is back", {
    timeout: 90_000,
  }, async () => {
    const eventKey = `msg_outage_${crypto.randomUUID()}`;
    const shard = shardFor(env, "demo", eventKey);
    const restore = await breakShardBindings(shard, { DB: unreachableD1() });

    expect((await deliverDemo(eventKey, credit("acct_outage", 1))).status).toBe(200);
    // Four relays fail: the first timed alarm, then three run at once instead of waiting out the backoff.
    await eventually(
      async () => ((await relayFailures(shard)) >= 1 ? true : undefined),
      15_000,
      "the first failed relay",
    );
    for (let retry = 0; retry < 3; retry++) expect(await runDurableObjectAlarm(shard)).toBe(true);
    expect(await relayFailures(shard)).toBeGreaterThanOrEqual(4);

    const open = (await systemMonitor(env).list()).filter(
      (alert) => alert.kind === "d1-unreachable" && alert.state === "open",
    );
    expect(open).toHaveLength(1);
    const alertId = open[0]!.alertId;
    const notices = await eventually(
      async () => {
        const found = await noticesFor(alertId);
        return found.length > 0 ? found : undefined;
      },
      10_000,
      "the opening notice",
    );
    expect(notices.map((notice) => [notice.type, notice.data.kind])).toEqual([["alert.opened", "d1-unreachable"]]);

    const degraded = await health();
    expect(degraded.status).toBe("degraded");
    expect(degraded.reasons).toContain("d1-unreachable");
    const details = await (await adminGet("/admin/api/health?source=demo")).json<{
      status: string;
      systemAlerts: {
        alertId: string;
        kind: string;
        reporters: string[];
        message: string;
        recordedState: string | null;
      }[];
    }>();
    expect(details.status).toBe("degraded");
    const incident = details.systemAlerts.find((alert) => alert.alertId === alertId)!;
    expect(incident).toMatchObject({ kind: "d1-unreachable", recordedState: null });
    expect(incident.reporters).toHaveLength(1);
    expect(incident.reporters[0]).toMatch(/^shard:/);
    expect(incident.message).toMatch(/D1 did not answer/);
    // D1 knows nothing of it yet: it was down.
    expect(await env.DB.prepare("SELECT id FROM alerts WHERE id = ?").bind(alertId).first()).toBeNull();

    await restore();
    expect(await runDurableObjectAlarm(shard)).toBe(true);
    expect(await waitForStatus("demo", eventKey)).toBe("processed");

    const recorded = await eventually(
      async () =>
        (await env.DB.prepare(
          "SELECT kind, state, source, notified_at AS notifiedAt, resolve_notified_at AS resolveNotifiedAt FROM alerts WHERE id = ?",
        )
          .bind(alertId)
          .first<{
            kind: string;
            state: string;
            source: string | null;
            notifiedAt: number | null;
            resolveNotifiedAt: number | null;
          }>()) ?? undefined,
      10_000,
      "the incident recorded in D1",
    );
    expect(recorded).toMatchObject({ kind: "d1-unreachable", state: "resolved", source: null });
    expect(recorded.notifiedAt).not.toBeNull();
    expect(recorded.resolveNotifiedAt).not.toBeNull();
    // The resolution is announced once. (The stand-in is shared by every test run in the working tree and a new
    // run restarts it, so what it heard before may be gone: the opening was checked above, when it was sent.)
    const after = (await noticesFor(alertId)).map((notice) => notice.type);
    expect(after.filter((type) => type === "alert.resolved")).toHaveLength(1);
    expect(after.filter((type) => type === "alert.opened").length).toBeLessThanOrEqual(1);
    expect((await health()).reasons ?? []).not.toContain("d1-unreachable");
    // Recorded and resolved: the monitor lets it go.
    expect((await systemMonitor(env).list()).map((alert) => alert.alertId)).not.toContain(alertId);
  });
});

describe("a relay failing while D1 answers", () => {
  it("raises relay-failing after 3 failures in a row, not d1-unreachable, and resolves it when the relay works", {
    timeout: 90_000,
  }, async () => {
    const eventKey = `msg_queue_down_${crypto.randomUUID()}`;
    const shard = shardFor(env, "demo", eventKey);
    const restore = await breakShardBindings(shard, { WORK_QUEUE: unreachableQueue() });
    expect((await deliverDemo(eventKey, credit("acct_queue_down", 1))).status).toBe(200);
    await eventually(
      async () => ((await relayFailures(shard)) >= 1 ? true : undefined),
      15_000,
      "the first failed relay",
    );
    const mine = async () =>
      (await systemMonitor(env).list()).filter(
        (alert) => alert.state === "open" && alert.reporters.some((reporter) => reporter.startsWith("shard:")),
      );
    // Two failures are a blip: nothing yet.
    expect(await runDurableObjectAlarm(shard)).toBe(true);
    expect(await relayFailures(shard)).toBe(2);
    expect((await mine()).map((alert) => alert.kind)).not.toContain("relay-failing");
    expect(await runDurableObjectAlarm(shard)).toBe(true);
    expect(await runDurableObjectAlarm(shard)).toBe(true);
    expect(await relayFailures(shard)).toBeGreaterThanOrEqual(3);
    const kinds = (await mine()).map((alert) => alert.kind);
    expect(kinds).toContain("relay-failing");
    expect(kinds).not.toContain("d1-unreachable");
    expect((await health()).reasons).toContain("relay-failing");

    await restore();
    expect(await runDurableObjectAlarm(shard)).toBe(true);
    expect(await waitForStatus("demo", eventKey)).toBe("processed");
    expect((await mine()).map((alert) => alert.kind)).not.toContain("relay-failing");
  });
});

describe("a cron run that cannot reach D1", () => {
  it("raises cron-failed and d1-unreachable once across runs, and resolves and records both after a good run", {
    timeout: 120_000,
  }, async () => {
    const broken = { ...env, DB: unreachableD1() } as Env;
    const now = Date.now();
    await runCron(now, broken);
    await runCron(now + 300_000, broken);
    const open = (await systemMonitor(env).list()).filter(
      (alert) => alert.state === "open" && alert.reporters.includes("cron"),
    );
    expect(open.map((alert) => alert.kind).sort()).toEqual(["cron-failed", "d1-unreachable"]);
    expect((await health()).reasons).toEqual(expect.arrayContaining(["cron-failed", "d1-unreachable"]));
    for (const alert of open) {
      const notices = await eventually(
        async () => {
          const found = await noticesFor(alert.alertId);
          return found.length > 0 ? found : undefined;
        },
        10_000,
        `the ${alert.kind} notice`,
      );
      expect(notices.map((notice) => notice.type)).toEqual(["alert.opened"]);
    }

    // Only this source, so the good run is quick and touches nothing other tests use.
    const quiet = {
      ...env,
      SOURCES: { "bodies-r2-small": (env.SOURCES as Record<string, unknown>)["bodies-r2-small"] },
    } as Env;
    await runCron(now + 600_000, quiet);
    for (const alert of open) {
      const row = await env.DB.prepare(
        "SELECT state, resolve_notified_at AS resolveNotifiedAt FROM alerts WHERE id = ?",
      )
        .bind(alert.alertId)
        .first<{ state: string; resolveNotifiedAt: number | null }>();
      expect(row).toMatchObject({ state: "resolved" });
      expect(row!.resolveNotifiedAt).not.toBeNull();
    }
    expect((await health()).reasons ?? []).not.toContain("cron-failed");
  });
});

describe("a shard past its storage threshold", () => {
  it("raises shard-storage on the cron's visit once, and resolves it when the shard is back under", async () => {
    const eventKey = `msg_storage_${crypto.randomUUID()}`;
    expect((await deliverDemo(eventKey, credit("acct_storage", 1))).status).toBe(200);
    await waitForStatus("demo", eventKey);
    const shard = shardFor(env, "demo", eventKey);
    const bytes = await shard.storageBytes();
    // The threshold set just under what this shard stores (the var ALERT_SHARD_STORAGE_BYTES), for its visits.
    const restore = await breakShardBindings(shard, { ALERT_SHARD_STORAGE_BYTES: String(bytes - 1) } as Partial<Env>);
    const farPast = 0;
    await shard.sweep(farPast, 1);
    await shard.sweep(farPast, 1);
    const open = (await systemMonitor(env).list()).filter(
      (alert) => alert.kind === "shard-storage" && alert.state === "open",
    );
    expect(open).toHaveLength(1);
    expect(open[0]!.message).toMatch(new RegExp(`stores ${bytes} bytes`));
    expect((await health()).reasons).toContain("shard-storage");
    const notices = await eventually(
      async () => {
        const found = await noticesFor(open[0]!.alertId);
        return found.length > 0 ? found : undefined;
      },
      10_000,
      "the shard-storage notice",
    );
    expect(notices.map((notice) => notice.type)).toEqual(["alert.opened"]);

    await restore();
    await shard.sweep(farPast, 1);
    expect((await health()).reasons ?? []).not.toContain("shard-storage");
    const recorded = await env.DB.prepare("SELECT kind, state FROM alerts WHERE id = ?").bind(open[0]!.alertId).first();
    expect(recorded).toEqual({ kind: "shard-storage", state: "resolved" });
  });
});

describe("the rules", () => {
  it("opens once per kind whoever reports it, and keeps a per-shard kind open while any shard still sees it", () => {
    const first = nextState("shard-backlog", new Set(), { reporter: "shard:a", firing: true }, false);
    expect(first.transition).toBe("open");
    const second = nextState("shard-backlog", first.reporters, { reporter: "shard:b", firing: true }, true);
    expect(second.transition).toBe("none");
    const oneQuiet = nextState("shard-backlog", second.reporters, { reporter: "shard:a", firing: false }, true);
    expect(oneQuiet).toMatchObject({ transition: "none", reporters: new Set(["shard:b"]) });
    expect(
      nextState("shard-backlog", oneQuiet.reporters, { reporter: "shard:b", firing: false }, true).transition,
    ).toBe("resolve");
    // D1 is one thing: anyone reaching it clears it for everyone.
    const d1 = nextState("d1-unreachable", new Set(["shard:a", "cron"]), { reporter: "shard:b", firing: false }, true);
    expect(d1).toMatchObject({ transition: "resolve", reporters: new Set() });
  });

  it("fires d1-storage above 80 % of D1's 10 GB cap, per database, and says nothing of size when the size is unknown", () => {
    const storage = (sizeBytes: number | null) =>
      cronObservations({ databases: [{ binding: "DB", reachable: true, sizeBytes }], failedSteps: [] }).find(
        (observation) => observation.kind === "d1-storage" && observation.reporter === "database:DB",
      );
    expect(storage(Math.floor(D1_CAP_BYTES * 0.81))).toMatchObject({ firing: true, reporter: "database:DB" });
    expect(storage(Math.floor(D1_CAP_BYTES * 0.79))).toMatchObject({ firing: false });
    expect(storage(null)).toBeUndefined();
    expect(storage(Math.floor(D1_CAP_BYTES * 0.81))!.message).toMatch(/MB of its 10240 MB limit/);
  });

  it("watches every receipt database: each one against its own cap, and any one that does not answer", () => {
    const observations = cronObservations({
      databases: [
        { binding: "DB", reachable: true, sizeBytes: Math.floor(D1_CAP_BYTES * 0.1) },
        { binding: "DB_EU", reachable: true, sizeBytes: Math.floor(D1_CAP_BYTES * 0.85) },
        { binding: "DB_US", reachable: false, sizeBytes: null },
      ],
      failedSteps: [],
    });
    const storage = observations.filter((observation) => observation.kind === "d1-storage");
    expect(storage.filter((observation) => observation.firing)).toEqual([
      expect.objectContaining({
        reporter: "database:DB_EU",
        message: expect.stringMatching(/^D1 database DB_EU holds/),
      }),
    ]);
    expect(observations.find((observation) => observation.kind === "d1-unreachable")).toMatchObject({
      firing: true,
      message: expect.stringMatching(/\(DB_US\)/),
    });
    const allWell = cronObservations({
      databases: [
        { binding: "DB", reachable: true, sizeBytes: 1 },
        { binding: "DB_EU", reachable: true, sizeBytes: 2 },
      ],
      failedSteps: [],
    });
    expect(allWell.filter((observation) => observation.firing)).toEqual([]);
  });

  it("answers degraded with every reason by name, keeping the invalid sources", () => {
    expect(healthAnswer([], [])).toEqual({ status: "ok" });
    expect(healthAnswer(["billing-typo"], ["d1-unreachable", "d1-unreachable"])).toMatchObject({
      status: "degraded",
      reasons: ["config-invalid", "d1-unreachable"],
      invalidSources: ["billing-typo"],
    });
  });
});
