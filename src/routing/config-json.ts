/**
 * A route option written as a TOML table or as the same thing in a JSON string, read as plain JSON. A TOML reader
 * may build objects without Object's prototype, which sift would take for values to compare instead of queries, so
 * every such option goes through JSON once, whatever its source.
 */
export function readJsonOption(
  value: unknown,
  option: string,
): { ok: true; value: unknown } | { ok: false; problem: string } {
  try {
    return { ok: true, value: JSON.parse(typeof value === "string" ? value : JSON.stringify(value ?? null)) };
  } catch {
    return { ok: false, problem: `${option} is a string but not JSON; write it as a table or as a JSON object` };
  }
}
