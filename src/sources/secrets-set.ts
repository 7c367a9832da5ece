import { secretValue } from "../lib/secrets";
import type { SourceOptions, SourceSecret } from "../providers/types";
import { SourceConfigError, usableSecrets } from "./config";
import { loadSources } from "./registry";

/**
 * Whether the secrets a source names are set on the Worker. A valid table whose secrets are not set is a deploy
 * mistake: every delivery to it answers 503 (`source_secret_missing`) until they are, so /health says so too.
 */

/**
 * The values of the Worker secrets a source's `verify_token` names (one name, or a list during a rotation), and
 * whether it names some but none of them is set (a deploy mistake, answered like a missing signing secret).
 */
export function verifyTokensOf(env: object, options: SourceOptions): { tokens: SourceSecret[]; allMissing: boolean } {
  const names = typeof options.verify_token === "string" ? [options.verify_token] : Array.isArray(options.verify_token) ? options.verify_token : [];
  const tokens = names.flatMap((name) => {
    const value = typeof name === "string" ? secretValue(env, name) : null;
    return value === null ? [] : [{ name: name as string, value }];
  });
  return { tokens, allMissing: names.length > 0 && tokens.length === 0 };
}

/**
 * Valid sources that cannot accept a delivery for want of a secret, each with the secret names it lacks: no
 * signing secret it names is set (an expired one does not count), or none of its verify tokens is. A source with
 * one secret of a rotation unset still verifies with the other, and is not listed.
 */
export function sourcesMissingSecrets(env: Pick<Env, "SOURCES">, now: number): Map<string, string[]> {
  const missingBySource = new Map<string, string[]>();
  let sources;
  try {
    sources = loadSources(env);
  } catch (error) {
    if (error instanceof SourceConfigError) return missingBySource;
    throw error;
  }
  for (const source of sources.values()) {
    const { secrets, missing } = usableSecrets(source, env, now);
    const tokens = verifyTokensOf(env, source.options);
    const lacking = [...(secrets.length === 0 ? missing : []), ...(tokens.allMissing ? [String(source.options.verify_token)] : [])];
    if (lacking.length > 0) missingBySource.set(source.name, lacking);
  }
  return missingBySource;
}
