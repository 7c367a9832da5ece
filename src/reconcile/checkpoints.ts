/**
 * The `checkpoints` table: per source and reconciler, a small JSON cursor to resume from. Every value written is
 * true on its own ("everything before X was seen"), so two overlapping runs can only make the next run repeat
 * work, never skip it.
 */

export async function readCheckpoint<T>(env: Env, source: string, reconciler: string): Promise<T | null> {
  const row = await env.DB.prepare("SELECT cursor FROM checkpoints WHERE source = ? AND reconciler = ?")
    .bind(source, reconciler)
    .first<{ cursor: string | null }>();
  if (!row?.cursor) return null;
  try {
    return JSON.parse(row.cursor) as T;
  } catch {
    return null;
  }
}

export async function writeCheckpoint(env: Env, source: string, reconciler: string, value: unknown, now: number): Promise<void> {
  await env.DB.prepare(
    `INSERT INTO checkpoints (source, reconciler, cursor, updated_at) VALUES (?1, ?2, ?3, ?4)
     ON CONFLICT (source, reconciler) DO UPDATE SET cursor = excluded.cursor, updated_at = excluded.updated_at`,
  )
    .bind(source, reconciler, JSON.stringify(value), now)
    .run();
}
