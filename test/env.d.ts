import type { D1Migration } from "cloudflare:test";

declare global {
  namespace Cloudflare {
    interface Env {
      TEST_MIGRATIONS: D1Migration[];
      /** A second receipt database (vitest.config.ts), named by the sources in test/fixtures/sources/databases.json. */
      DB_SECOND: D1Database;
      /** The ring of receipt partitions (vitest.config.ts RECEIPT_PARTITIONS), named by test/fixtures/sources/partitions.json. */
      DB_P0: D1Database;
      DB_P1: D1Database;
      DB_P2: D1Database;
      DB_P3: D1Database;
      RECEIPT_PARTITIONS: { databases: string[]; period: string; spread: number; keep?: string };
    }
  }
}
