import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { metricsQuerySettings } from "../../src/admin/stats/analytics-query";
import wranglerToml from "../../wrangler.toml?raw";
import { deliverTo, uniqueSource } from "./support";

/**
 * The METRICS Analytics Engine binding ships in wrangler.toml, for local runs and production alike; the tests run
 * with it as configured (simulated locally), so a delivery writes its data point on the real path.
 */
describe("the METRICS binding", () => {
  it("is declared at the top level and in [env.production], with the same dataset", () => {
    const tables = [
      ...wranglerToml.matchAll(
        /^\[\[(env\.production\.)?analytics_engine_datasets\]\]\nbinding = "METRICS"\ndataset = "([a-z_]+)"/gm,
      ),
    ];
    expect(tables.map((match) => [match[1] ?? "top level", match[2]])).toEqual([
      ["top level", "webhook_receiver_metrics"],
      ["env.production.", "webhook_receiver_metrics"],
    ]);
  });

  it("is bound in the test runtime, and deliveries are acknowledged with it bound", async () => {
    expect(typeof env.METRICS.writeDataPoint).toBe("function");
    const response = await deliverTo("admin-audit", `msg_metrics_${uniqueSource("m")}`, {
      type: "account.credited",
      data: { account: "acct_metrics", amount: 1 },
    });
    expect(response.status).toBe(200);
  });

  it("is not read back without the SQL API settings: the reports say the numbers are not stored", () => {
    expect(metricsQuerySettings(env)).toBeNull();
    expect(metricsQuerySettings({ ...env, METRICS_ACCOUNT_ID: "0123", METRICS_API_TOKEN: "token" })).toMatchObject({
      dataset: "webhook_receiver_metrics",
    });
  });
});
