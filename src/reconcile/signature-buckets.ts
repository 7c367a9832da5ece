import type { SignatureThresholds, SignatureWindow } from "../monitor/signature-spike";
import type { SignatureCounts } from "../monitor/signature-tally";

/**
 * The system monitor's signature counts (src/monitor/signature-tally.ts flushes them here): one row per source
 * and BUCKET_MS, added to by each isolate's flush, pruned past the window at each write. Bounded: a source has at
 * most window / BUCKET_MS + 1 rows, and rows come only from configured sources with refusals (or watched ones).
 */

const BUCKET_MS = 60_000;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS signature_buckets (
  source TEXT NOT NULL,
  bucket_at INTEGER NOT NULL,
  rejected INTEGER NOT NULL,
  verified INTEGER NOT NULL,
  reasons TEXT NOT NULL,
  PRIMARY KEY (source, bucket_at)
) WITHOUT ROWID;
`;

export class SignatureBuckets {
  constructor(private readonly sql: SqlStorage) {
    sql.exec(SCHEMA);
  }

  add(report: readonly SignatureCounts[], now: number, windowMs: number): void {
    const bucketAt = Math.floor(now / BUCKET_MS) * BUCKET_MS;
    for (const counts of report) {
      if (counts.rejected === 0 && counts.verified === 0) continue;
      const held = this.sql
        .exec<{ reasons: string }>(
          "SELECT reasons FROM signature_buckets WHERE source = ? AND bucket_at = ?",
          counts.source,
          bucketAt,
        )
        .toArray()[0];
      const reasons = mergeReasons(held ? JSON.parse(held.reasons) : {}, counts.reasons);
      this.sql.exec(
        `INSERT INTO signature_buckets (source, bucket_at, rejected, verified, reasons) VALUES (?, ?, ?, ?, ?)
         ON CONFLICT (source, bucket_at) DO UPDATE SET rejected = rejected + excluded.rejected,
           verified = verified + excluded.verified, reasons = excluded.reasons`,
        counts.source,
        bucketAt,
        counts.rejected,
        counts.verified,
        JSON.stringify(reasons),
      );
    }
    this.sql.exec("DELETE FROM signature_buckets WHERE bucket_at <= ?", now - windowMs - BUCKET_MS);
  }

  /** Each source's counts over the window ending at `now`. */
  windows(now: number, thresholds: Pick<SignatureThresholds, "windowMs">): SignatureWindow[] {
    const rows = this.sql
      .exec<{ source: string; rejected: number; verified: number; reasons: string }>(
        "SELECT source, rejected, verified, reasons FROM signature_buckets WHERE bucket_at > ? ORDER BY source",
        now - thresholds.windowMs,
      )
      .toArray();
    const bySource = new Map<string, SignatureWindow>();
    for (const row of rows) {
      const window = bySource.get(row.source) ?? { source: row.source, rejected: 0, verified: 0, reasons: {} };
      window.rejected += row.rejected;
      window.verified += row.verified;
      window.reasons = mergeReasons(window.reasons, JSON.parse(row.reasons));
      bySource.set(row.source, window);
    }
    return [...bySource.values()];
  }
}

function mergeReasons(a: Record<string, number>, b: Record<string, number>): Record<string, number> {
  const merged = { ...a };
  for (const [reason, count] of Object.entries(b)) merged[reason] = (merged[reason] ?? 0) + count;
  return merged;
}
