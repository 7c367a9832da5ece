import { drizzle } from "drizzle-orm/d1";
import { meteredD1 } from "../lib/meter";
import * as schema from "./schema";

export type Database = ReturnType<typeof database>;

/** The one way to D1: Drizzle over the metered binding, so every call and row is counted where it happens. */
export function database(env: Pick<Env, "DB">) {
  return drizzle(meteredD1(env.DB), { schema });
}
