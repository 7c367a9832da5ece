import { applyD1Migrations } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { isD1Database } from "../../src/sources/d1-binding";

// Runs before every test file; applyD1Migrations skips migrations already applied. Every D1 binding gets the
// same schema: a source's receipts may live in any of them (src/sources/databases.ts). Each test file starts a
// fresh workerd, so every file applies every migration to every database: the databases side by side (each is
// its own SQLite), the migrations of one database in order.
await Promise.all(
  Object.values(env as unknown as Record<string, unknown>)
    .filter(isD1Database)
    .map((binding) => applyD1Migrations(binding, env.TEST_MIGRATIONS)),
);
