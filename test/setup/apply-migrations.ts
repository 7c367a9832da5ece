import { applyD1Migrations } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { isD1Database } from "../../src/sources/d1-binding";

// Runs before every test file; applyD1Migrations skips migrations already applied. Every D1 binding gets the
// same schema: a source's receipts may live in any of them (src/sources/databases.ts).
for (const binding of Object.values(env as unknown as Record<string, unknown>).filter(isD1Database)) {
  await applyD1Migrations(binding, env.TEST_MIGRATIONS);
}
