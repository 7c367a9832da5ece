import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { defineConfig } from "vitest/config";

export default defineConfig(async () => ({
  plugins: [
    cloudflareTest({
      wrangler: { configPath: "./wrangler.toml" },
      miniflare: {
        // Test-only bindings: the migrations the setup file applies, and secrets that .dev.vars holds locally.
        bindings: {
          TEST_MIGRATIONS: await readD1Migrations("./migrations"),
          DEMO_WEBHOOK_SECRET: "whsec_dGVzdC1zZWNyZXQtZm9yLXRoZS1kZW1vLXNvdXJjZQ==",
          GATEWAY_SIGNING_SECRET: "whsec_dGVzdC1nYXRld2F5LXNpZ25pbmctc2VjcmV0",
          ADMIN_TOKEN: "test-admin-token",
        },
      },
    }),
  ],
  test: {
    include: ["test/**/*.test.ts", "src/**/*.test.ts"],
    setupFiles: ["./test/setup/apply-migrations.ts"],
    testTimeout: 30_000,
  },
}));
