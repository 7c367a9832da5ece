import { readdirSync, readFileSync } from "node:fs";
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import type { Json } from "miniflare";
import { defineConfig } from "vitest/config";
import { unstable_readConfig } from "wrangler";

/**
 * Test-only configuration is assembled from small files so that each area adds its own without editing this one:
 *   test/fixtures/sources/*.json  — extra sources, added to the ones wrangler.toml declares (the demo source)
 *   test/fixtures/secrets/*.json  — the secrets those sources name
 *   test/setup/global/*.ts        — Node-side global setup (stand-in servers for forwards and provider APIs)
 */
function mergeJsonFiles(directory: string): Record<string, Json> {
  const merged: Record<string, Json> = {};
  for (const file of readdirSync(directory).filter((name) => name.endsWith(".json")).sort()) {
    Object.assign(merged, JSON.parse(readFileSync(`${directory}/${file}`, "utf8")));
  }
  return merged;
}

const deployedSources = unstable_readConfig({ config: "./wrangler.toml" }).vars.SOURCES as Record<string, Json>;

const globalSetup = readdirSync("./test/setup/global")
  .filter((name) => name.endsWith(".ts"))
  .sort()
  .map((name) => `./test/setup/global/${name}`);

export default defineConfig(async () => ({
  plugins: [
    cloudflareTest({
      wrangler: { configPath: "./wrangler.toml" },
      miniflare: {
        bindings: {
          TEST_MIGRATIONS: await readD1Migrations("./migrations"),
          SOURCES: { ...deployedSources, ...mergeJsonFiles("./test/fixtures/sources") },
          ...mergeJsonFiles("./test/fixtures/secrets"),
        },
      },
    }),
  ],
  test: {
    include: ["test/**/*.test.ts", "src/**/*.test.ts"],
    setupFiles: ["./test/setup/apply-migrations.ts"],
    globalSetup,
    testTimeout: 30_000,
    // The receiver logs one JSON line per delivery and attempt; show them only for a test that fails.
    silent: "passed-only" as const,
  },
}));
