import { secretValue } from "../lib/secrets";
import { adapterFor } from "../providers/registry";
import type { ProviderOptions, SourceSecret } from "../providers/types";
import { type SourceConfig, SourceConfigError, usableSecrets } from "./config";
import { loadSources } from "./registry";

/**
 * Whether the secrets a source names are set on the Worker. A valid table whose secrets are not set is a deploy
 * mistake: every delivery to it answers 503 (`source_secret_missing`) until they are, and /health says so too.
 * The route and /health ask the same question here, so they can never disagree.
 */

export interface SourceKeys {
  /** Signing secrets usable now (set, and not past their `expires`). */
  secrets: SourceSecret[];
  /** Handshake verify tokens that are set. */
  verifyTokens: SourceSecret[];
  /** Signing secret names left unset when none usable is set (nothing verifies); empty otherwise. */
  signingUnset: string[];
  /** Verify token names when the source names some but none is set; empty otherwise. */
  verifyTokensUnset: string[];
  /**
   * Signing secret names when every one is set and all are past their `expires` (nothing verifies: a rotation
   * that was never finished); empty otherwise. Not for an adapter that keeps the sender's secret from a
   * handshake: its listed secrets only prove the handshake, and its deliveries verify with the kept ones.
   */
  signingExpired: string[];
}

/** The secret values a delivery to `source` may be verified with now, and what is unset so that none can be. */
export function sourceKeys(source: SourceConfig, env: object, now: number): SourceKeys {
  const { secrets, missing } = usableSecrets(source, env, now);
  const tokenNames = verifyTokenNames(source.options);
  const verifyTokens = tokenNames.flatMap((name) => {
    const value = secretValue(env, name);
    return value === null ? [] : [{ name, value }];
  });
  return {
    secrets,
    verifyTokens,
    signingUnset: secrets.length === 0 ? missing : [],
    verifyTokensUnset: tokenNames.length > 0 && verifyTokens.length === 0 ? tokenNames : [],
    signingExpired:
      secrets.length === 0 && missing.length === 0 && !adapterFor(source.provider)?.keptSecrets
        ? source.secrets.map((ref) => ref.name)
        : [],
  };
}

/** The Worker secret names a source's `verify_token` names: one name, or a list during a rotation. */
function verifyTokenNames(options: ProviderOptions): string[] {
  const named =
    typeof options.verify_token === "string"
      ? [options.verify_token]
      : Array.isArray(options.verify_token)
        ? options.verify_token
        : [];
  return named.filter((name): name is string => typeof name === "string");
}

/** The valid sources, or none when SOURCES itself is unreadable (then /health reports that instead). */
function validSources(env: Pick<Env, "SOURCES">): SourceConfig[] {
  try {
    return [...loadSources(env).values()];
  } catch (error) {
    if (error instanceof SourceConfigError) return [];
    throw error;
  }
}

/**
 * Valid sources that cannot accept a delivery for want of a secret, each with the secret names it lacks: no
 * unexpired signing secret it names is set, or none of its verify tokens is. A source with
 * one secret of a rotation unset still verifies with the other, and is not listed.
 */
export function sourcesMissingSecrets(env: Pick<Env, "SOURCES">, now: number): Map<string, string[]> {
  const missingBySource = new Map<string, string[]>();
  for (const source of validSources(env)) {
    const { signingUnset, verifyTokensUnset } = sourceKeys(source, env, now);
    const lacking = [...signingUnset, ...verifyTokensUnset];
    if (lacking.length > 0) missingBySource.set(source.name, lacking);
  }
  return missingBySource;
}

/**
 * Valid sources every signing secret of which is past its `expires`, each with those secret names: every delivery
 * to them answers 503 (`source_secrets_expired`) until a fresh secret is listed and deployed.
 */
export function sourcesWithExpiredSecrets(env: Pick<Env, "SOURCES">, now: number): Map<string, string[]> {
  const expiredBySource = new Map<string, string[]>();
  for (const source of validSources(env)) {
    const { signingExpired } = sourceKeys(source, env, now);
    if (signingExpired.length > 0) expiredBySource.set(source.name, signingExpired);
  }
  return expiredBySource;
}
