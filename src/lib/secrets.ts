/**
 * The one way to read a Worker secret (or an optional string var) by name. Secrets are named in config, never
 * typed in `Env`, so every reader goes through here instead of casting `env` on its own.
 *
 * @example
 * const signingKey = secretValue(env, env.GATEWAY_SIGNING_SECRET_NAME);
 * if (signingKey === null) throw new Error("GATEWAY_SIGNING_SECRET is not set");
 */
export function secretValue(env: object, name: string): string | null {
  const value: unknown = (env as Record<string, unknown>)[name];
  return typeof value === "string" && value.length > 0 ? value : null;
}
