/**
 * When a body goes to R2 instead of a D1 row: above 64 KB by default, or a source's `r2_body_threshold` (bytes;
 * 0 sends every body to R2). Only applies when the BODIES bucket is bound (src/bodies/stored-bodies.ts).
 */

export const DEFAULT_R2_BODY_THRESHOLD = 64 * 1024;

/**
 * The threshold for a source's options; the default when unset. Only for a table ./config.ts accepted: a malformed
 * value is refused there (SourceTableSchema, ./source-schema.ts).
 */
export function r2BodyThreshold(options: Record<string, unknown>): number {
  const value = options.r2_body_threshold;
  return typeof value === "number" ? value : DEFAULT_R2_BODY_THRESHOLD;
}

/**
 * Whether a source's bodies go to R2 segments (one object per relay batch, src/bodies/segment-format.ts) rather than
 * D1 rows: `body_segments = true`. Only applies when the BODIES bucket is bound; off by default.
 */
export function bodySegments(options: Record<string, unknown>): boolean {
  return options.body_segments === true;
}
