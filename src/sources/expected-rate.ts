/**
 * `expected_rate`: the events a second a source is expected to sustain, optional. Nothing on the delivery path reads
 * it: `npm run cli -- check` holds it against the claim shards and the database the source is configured with
 * (src/capacity/source-capacity.ts), so a source that would fill its stores within its retention is named before it
 * does. Checked with the rest of the source's table (SourceTableSchema, ./source-schema.ts), read here.
 */

/** The source's expected events a second, or null when it sets none. Only for a table ./config.ts accepted. */
export function expectedRate(options: Record<string, unknown>): number | null {
  return typeof options.expected_rate === "number" ? options.expected_rate : null;
}
