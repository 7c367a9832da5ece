import { drizzle } from "drizzle-orm/d1";
import { meteredD1 } from "../lib/meter";
import * as schema from "./schema";

export type Database = ReturnType<typeof openDatabase>;

/**
 * One Drizzle instance per D1 binding for the isolate's life: building one reads the whole schema's relational
 * config, and the consumer asked for one per statement it built (a measurable share of its CPU per event,
 * docs/performance.md, "What the figures decided"). The instance holds no state of its own between calls; the meter counts where it did.
 */
const opened = new WeakMap<D1Database, Database>();

/** The one way to D1: Drizzle over the metered binding, so every call and row is counted where it happens. */
export function database(env: Pick<Env, "DB">): Database {
  let db = opened.get(env.DB);
  if (!db) {
    db = openDatabase(env.DB);
    opened.set(env.DB, db);
  }
  return db;
}

function openDatabase(binding: D1Database) {
  return drizzle(meteredD1(binding), { schema });
}
