import type { D1Migration } from "cloudflare:test";

declare global {
  namespace Cloudflare {
    interface Env {
      TEST_MIGRATIONS: D1Migration[];
      /** A second receipt database (vitest.config.ts), named by the sources in test/fixtures/sources/databases.json. */
      DB_SECOND: D1Database;
    }
  }
}
