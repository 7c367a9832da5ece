import { execCounted } from "../lib/meter";

/**
 * When each secret of a rotation last verified a delivery, kept durably in the claim shard for the verification
 * health (docs/operating.md, "Verification health"), at a bounded price: the shard writes a secret's row at most
 * once per hour bucket, never per delivery. The first verified claim of a new hour stamps it; every later one in
 * that hour is answered from this object's memory without touching SQLite, and after a restart the upsert's WHERE
 * writes nothing within an hour already stamped. So `last_verified_at` is the time of the newest hour's first
 * delivery: the secret was last used at or after it, within the hour. Only a source with more than one secret to
 * choose from sends a name (src/ingest/secret-choice.ts): with one there is nothing to tell apart, and the happy
 * path's rows stay as they were.
 */
export const SECRET_USE_SCHEMA = `
CREATE TABLE IF NOT EXISTS secret_use (
  source TEXT NOT NULL,
  secret_name TEXT NOT NULL,
  first_verified_at INTEGER NOT NULL,
  last_verified_at INTEGER NOT NULL,
  PRIMARY KEY (source, secret_name)
) WITHOUT ROWID;`;

export const SECRET_USE_BUCKET_MS = 3_600_000;

/** What a shard knows of one secret's use: the first and the newest hour's first verified delivery it saw. */
export interface SecretUse {
  secretName: string;
  firstVerifiedAt: number;
  lastVerifiedAt: number;
}

export function useBucketOf(verifiedAt: number): number {
  return Math.floor(verifiedAt / SECRET_USE_BUCKET_MS);
}

export class SecretUseStamps {
  /** The newest bucket stamped per source and secret by this object since it started. */
  private readonly stamped = new Map<string, number>();

  constructor(private readonly sql: SqlStorage) {}

  /** Inside the claim's turn, so the stamp is durable with the claim; a row at most once per secret and hour. */
  stamp(source: string, secretName: string, verifiedAt: number): void {
    const key = `${source}\u0000${secretName}`;
    const bucket = useBucketOf(verifiedAt);
    if ((this.stamped.get(key) ?? -1) >= bucket) return;
    execCounted(
      this.sql,
      `INSERT INTO secret_use (source, secret_name, first_verified_at, last_verified_at) VALUES (?, ?, ?, ?)
       ON CONFLICT (source, secret_name) DO UPDATE SET last_verified_at = excluded.last_verified_at
       WHERE excluded.last_verified_at / ${SECRET_USE_BUCKET_MS} > last_verified_at / ${SECRET_USE_BUCKET_MS}`,
      source,
      secretName,
      verifiedAt,
      verifiedAt,
    );
    this.stamped.set(key, bucket);
  }

  /** Every secret of `source` this shard has seen verify a delivery. */
  read(source: string): SecretUse[] {
    return execCounted<{ secret_name: string; first_verified_at: number; last_verified_at: number }>(
      this.sql,
      "SELECT secret_name, first_verified_at, last_verified_at FROM secret_use WHERE source = ?",
      source,
    ).map((row) => ({
      secretName: row.secret_name,
      firstVerifiedAt: row.first_verified_at,
      lastVerifiedAt: row.last_verified_at,
    }));
  }
}

/** One source's secrets over all its shards: each secret's earliest first and newest last use. */
export function mergeSecretUse(perShard: readonly (readonly SecretUse[])[]): SecretUse[] {
  const merged = new Map<string, SecretUse>();
  for (const use of perShard.flat()) {
    const seen = merged.get(use.secretName);
    merged.set(
      use.secretName,
      seen
        ? {
            secretName: use.secretName,
            firstVerifiedAt: Math.min(seen.firstVerifiedAt, use.firstVerifiedAt),
            lastVerifiedAt: Math.max(seen.lastVerifiedAt, use.lastVerifiedAt),
          }
        : { ...use },
    );
  }
  return [...merged.values()];
}
