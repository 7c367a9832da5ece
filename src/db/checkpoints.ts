import { and, eq, sql } from "drizzle-orm";
import { type Database, database } from "./client";
import { checkpoints } from "./schema";

/**
 * The `checkpoints` table: per source and reconciler, a small JSON cursor to resume from. Every value written is
 * true on its own ("everything before X was seen"), so two overlapping runs can only make the next run repeat
 * work, never skip it.
 */

export async function readCheckpoint<T>(env: Env, source: string, reconciler: string): Promise<T | null> {
  const [row] = await database(env)
    .select({ cursor: checkpoints.cursor })
    .from(checkpoints)
    .where(and(eq(checkpoints.source, source), eq(checkpoints.reconciler, reconciler)));
  return parseCursor<T>(row?.cursor ?? null);
}

/** A stored cursor, or null when there is none or it is not JSON (the run then starts afresh). */
export function parseCursor<T>(cursor: string | null): T | null {
  if (!cursor) return null;
  try {
    return JSON.parse(cursor) as T;
  } catch {
    return null;
  }
}

export async function writeCheckpoint(
  env: Env,
  source: string,
  reconciler: string,
  value: unknown,
  now: number,
): Promise<void> {
  await checkpointWrite(database(env), source, reconciler, value, now);
}

/** The write of one cursor, as a statement a caller may batch with others. */
export function checkpointWrite(db: Database, source: string, reconciler: string, value: unknown, now: number) {
  return db
    .insert(checkpoints)
    .values({ source, reconciler, cursor: JSON.stringify(value), updatedAt: now })
    .onConflictDoUpdate({
      target: [checkpoints.source, checkpoints.reconciler],
      set: { cursor: sql`excluded.cursor`, updatedAt: sql`excluded.updated_at` },
    });
}
