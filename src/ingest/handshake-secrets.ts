import { desc, eq } from "drizzle-orm";
import { database } from "../db/client";
import { handshakeSecrets } from "../db/schema";
import type { SourceSecret } from "../providers/types";

/**
 * Secrets senders hand over in a handshake (Asana's X-Hook-Secret, Notion's verification_token), kept in D1's
 * `handshake_secrets`. Only sources whose adapter has `storedSecrets` read it, so every other source's
 * acknowledgement path still touches no D1. Reads are cached per isolate for a minute; an empty answer is never
 * cached, and a cached list is re-read once when it verifies nothing (a hook registered in another isolate).
 */

/** The newest this many per source are tried: the verification budget bounds the rest anyway. */
const KEPT_PER_SOURCE = 8;
const CACHE_TTL_MS = 60_000;

const cache = new Map<string, { secrets: SourceSecret[]; readAt: number }>();

function asSecrets(rows: { secret: string; receivedAt: number }[]): SourceSecret[] {
  // The name is what logs and annotations could ever see: never the value.
  return rows.map((row) => ({ name: `handshake@${row.receivedAt}`, value: row.secret }));
}

export async function storedSecrets(env: Pick<Env, "DB">, source: string, now: number, fresh = false): Promise<{ secrets: SourceSecret[]; cached: boolean }> {
  const hit = cache.get(source);
  if (!fresh && hit && now - hit.readAt < CACHE_TTL_MS) return { secrets: hit.secrets, cached: true };
  const rows = await database(env)
    .select({ secret: handshakeSecrets.secret, receivedAt: handshakeSecrets.receivedAt })
    .from(handshakeSecrets)
    .where(eq(handshakeSecrets.source, source))
    .orderBy(desc(handshakeSecrets.receivedAt))
    .limit(KEPT_PER_SOURCE);
  const secrets = asSecrets(rows);
  if (secrets.length > 0) cache.set(source, { secrets, readAt: now });
  else cache.delete(source);
  return { secrets, cached: false };
}

export async function keepSecret(env: Pick<Env, "DB">, source: string, secret: string, now: number): Promise<void> {
  // The same secret handed over twice (a repeated handshake) keeps its first row.
  await database(env).insert(handshakeSecrets).values({ source, secret, receivedAt: now }).onConflictDoNothing();
  cache.delete(source);
}
