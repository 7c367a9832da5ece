import { defineConfig } from "drizzle-kit";

// Migrations are generated here and applied by `wrangler d1 migrations apply`, never by drizzle-kit itself.
export default defineConfig({
  dialect: "sqlite",
  schema: "./src/db/schema.ts",
  out: "./migrations",
});
