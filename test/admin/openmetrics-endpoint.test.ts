import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { StatsReport } from "../../src/admin/stats/stats";
import { receiptDatabaseEnvs } from "../../src/sources/databases";
import { credit, waitForStatus } from "../support/deliveries";
import { adminGet, deliverTo, seedReceipt } from "./support";

/**
 * GET /admin/api/metrics through the Worker's own fetch: authenticated like the rest of /admin/api, valid
 * OpenMetrics text (checked by the strict parser below, not by a lenient one), the same numbers as
 * GET /admin/api/stats, and the same D1 cost as it.
 */

interface Family {
  type: string;
  unit?: string;
  help?: string;
  samples: { labels: Record<string, string>; value: number }[];
}

/** Label values per the OpenMetrics ABNF: only \\, \" and \n are escapes; anything else after a backslash is an error. */
function parseLabels(text: string): Record<string, string> {
  const labels: Record<string, string> = {};
  let at = 0;
  while (at < text.length) {
    const name = /^[a-zA-Z_][a-zA-Z0-9_]*="/.exec(text.slice(at));
    if (!name) throw new Error(`bad label at ${text.slice(at)}`);
    const labelName = name[0].slice(0, -2);
    at += name[0].length;
    let value = "";
    for (;;) {
      const char = text[at];
      if (char === undefined) throw new Error("unterminated label value");
      at += 1;
      if (char === '"') break;
      if (char === "\n") throw new Error("raw line feed in a label value");
      if (char !== "\\") {
        value += char;
        continue;
      }
      const escaped = text[at];
      at += 1;
      if (escaped === "\\") value += "\\";
      else if (escaped === '"') value += '"';
      else if (escaped === "n") value += "\n";
      else throw new Error(`invalid escape \\${escaped}`);
    }
    if (labelName in labels) throw new Error(`label ${labelName} twice`);
    labels[labelName] = value;
    if (at === text.length) break;
    if (text[at] !== ",") throw new Error(`expected , at ${text.slice(at)}`);
    at += 1;
  }
  return labels;
}

/** A strict reader of what the endpoint writes: metadata before samples, families not interleaved, `# EOF` last. */
function parseOpenMetrics(text: string): Map<string, Family> {
  if (!text.endsWith("# EOF\n")) throw new Error("does not end in # EOF and a line feed");
  const lines = text.slice(0, -1).split("\n");
  expect(lines.at(-1)).toBe("# EOF");
  const families = new Map<string, Family>();
  let current: string | null = null;
  for (const line of lines.slice(0, -1)) {
    const meta = /^# (TYPE|UNIT|HELP) ([a-zA-Z_:][a-zA-Z0-9_:]*) (.*)$/.exec(line);
    if (meta) {
      const [, keyword, name, rest] = meta as unknown as [string, string, string, string];
      if (keyword === "TYPE") {
        if (families.has(name)) throw new Error(`family ${name} declared twice`);
        if (!["gauge", "counter", "summary", "histogram", "stateset", "info", "unknown"].includes(rest))
          throw new Error(`bad type ${rest}`);
        families.set(name, { type: rest, samples: [] });
        current = name;
        continue;
      }
      if (name !== current) throw new Error(`${keyword} for ${name} outside its family`);
      const family = families.get(name)!;
      if (family.samples.length > 0) throw new Error(`${keyword} after samples of ${name}`);
      if (keyword === "UNIT") {
        if (!name.endsWith(`_${rest}`)) throw new Error(`${name} does not end in its unit ${rest}`);
        family.unit = rest;
      } else family.help = rest;
      continue;
    }
    if (line.startsWith("#")) throw new Error(`unknown comment line ${line}`);
    const sample = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/s.exec(line);
    if (!sample) throw new Error(`bad sample line ${line}`);
    const [, name, labelText, valueText] = sample as unknown as [string, string, string | undefined, string];
    if (name !== current) throw new Error(`sample ${name} outside its family ${current}`);
    const value = Number(valueText);
    if (!/^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$/.test(valueText) || !Number.isFinite(value))
      throw new Error(`bad value ${valueText}`);
    const family = families.get(name)!;
    const labels = labelText === undefined ? {} : parseLabels(labelText);
    if (family.type === "summary" && !("quantile" in labels)) throw new Error(`summary sample without quantile`);
    const key = JSON.stringify(Object.entries(labels).sort());
    if (family.samples.some((seen) => JSON.stringify(Object.entries(seen.labels).sort()) === key))
      throw new Error(`${name} has the label set ${key} twice`);
    family.samples.push({ labels, value });
  }
  return families;
}

function sampleValue(families: Map<string, Family>, name: string, labels: Record<string, string>): number | undefined {
  return families
    .get(name)
    ?.samples.find((sample) => Object.entries(labels).every(([key, value]) => sample.labels[key] === value))?.value;
}

async function meters(): Promise<{ d1Calls: number; d1RowsRead: number }> {
  return ((await (await adminGet("/admin/api/meters")).json()) as { totals: { d1Calls: number; d1RowsRead: number } })
    .totals;
}

describe("GET /admin/api/metrics", () => {
  it("is refused without the admin token, in the one error envelope", async () => {
    const refused: Record<string, string>[] = [{}, { authorization: "Bearer not-the-token" }];
    for (const headers of refused) {
      const response = await adminGet("/admin/api/metrics", headers);
      expect(response.status).toBe(401);
      expect(response.headers.get("content-type")).toMatch(/^application\/json/);
      expect(await response.json()).toEqual({ error: { code: "unauthorized", message: expect.any(String) } });
    }
  });

  it("refuses an unknown query parameter and a bad window like /admin/api/stats", async () => {
    expect((await adminGet("/admin/api/metrics?windw=1h")).status).toBe(400);
    expect((await adminGet("/admin/api/metrics?window=forever")).status).toBe(400);
  });

  it("answers OpenMetrics text with the stats API's numbers, escapes a source name, and costs the D1 reads the stats cost", async () => {
    const eventKeys = Array.from({ length: 2 }, () => `msg_openmetrics_${crypto.randomUUID()}`);
    for (const eventKey of eventKeys)
      expect((await deliverTo("admin-audit", eventKey, credit(`acct_${eventKey}`, 1))).status).toBe(200);
    const deadKey = `msg_openmetrics_dead_${crypto.randomUUID()}`;
    await deliverTo("admin-audit", deadKey, { type: "account.credited", data: { account: "acct_om", amount: "x" } });
    for (const eventKey of eventKeys) await waitForStatus("admin-audit", eventKey);
    await waitForStatus("admin-audit", deadKey, ["dead"]);
    // A name no config allows, as a receipt from an older config would carry it: a quote, a backslash, a line feed.
    const oddSource = `odd"source\\with\nbreak-${crypto.randomUUID().slice(0, 8)}`;
    await seedReceipt({ source: oddSource, receivedAt: Date.now() - 1_000, status: "processed" });

    const beforeStats = await meters();
    const stats = (await (await adminGet("/admin/api/stats")).json()) as StatsReport;
    const statsCost = await meters();
    const response = await adminGet("/admin/api/metrics");
    const scrapeCost = await meters();

    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("application/openmetrics-text; version=1.0.0; charset=utf-8");
    const text = new TextDecoder().decode(await response.arrayBuffer());
    expect(text).toContain(`source="odd\\"source\\\\with\\nbreak-`);
    const families = parseOpenMetrics(text);

    for (const source of stats.sources) {
      const labels = { source: source.source };
      expect(sampleValue(families, "webhook_receiver_receipts_received", labels)).toBe(source.received);
      for (const outcome of ["processed", "stale", "skipped", "dead", "dismissed", "pending"] as const)
        expect(sampleValue(families, "webhook_receiver_receipts", { ...labels, outcome })).toBe(source[outcome]);
      expect(sampleValue(families, "webhook_receiver_dead_letters", labels)).toBe(source.deadTotal);
      expect(sampleValue(families, "webhook_receiver_open_alerts", labels)).toBe(source.openAlerts);
      expect(sampleValue(families, "webhook_receiver_quarantined_copies", labels)).toBe(source.quarantined);
      const p50 = source.processingLatencyMs.p50;
      expect(sampleValue(families, "webhook_receiver_processing_latency_seconds", { ...labels, quantile: "0.5" })).toBe(
        p50 === null ? undefined : p50 / 1000,
      );
    }
    const audit = stats.sources.find((source) => source.source === "admin-audit")!;
    expect(audit.processed).toBeGreaterThanOrEqual(2);
    expect(audit.deadTotal).toBeGreaterThanOrEqual(1);
    expect(sampleValue(families, "webhook_receiver_receipts", { source: oddSource, outcome: "processed" })).toBe(1);
    expect(families.get("webhook_receiver_processing_latency_seconds")).toMatchObject({
      type: "summary",
      unit: "seconds",
    });
    expect(sampleValue(families, "webhook_receiver_unrelayed_claims", { source: "admin-audit" })).toBe(0);
    expect(sampleValue(families, "webhook_receiver_claim_shard_bytes", { source: "admin-audit" })).toBeGreaterThan(0);
    expect(sampleValue(families, "webhook_receiver_d1_database_bytes", { database: "DB" })).toBeGreaterThan(0);
    expect(sampleValue(families, "webhook_receiver_monitor_up", {})).toBe(1);

    // A fixed number of D1 queries, and exactly the rows the stats endpoint reads: nothing of its own.
    const scrape = {
      calls: scrapeCost.d1Calls - statsCost.d1Calls,
      rows: scrapeCost.d1RowsRead - statsCost.d1RowsRead,
    };
    const statsRead = {
      calls: statsCost.d1Calls - beforeStats.d1Calls,
      rows: statsCost.d1RowsRead - beforeStats.d1RowsRead,
    };
    console.info(`one scrape: ${scrape.calls} D1 queries, ${scrape.rows} rows read (meta.rows_read)`);
    // Per receipt database: the stats' nine reads and its size; plus the open alerts, from `DB`.
    expect(scrape.calls).toBe(10 * receiptDatabaseEnvs(env).length + 1);
    expect(scrape).toEqual(statsRead);
    // Slow only here: the scrape and GET /admin/api/meters each ask every claim shard of every fixture source
    // (dozens of sources), and a first ask creates the Durable Object.
  }, 600_000);
});
