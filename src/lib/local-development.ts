import { secretValue } from "./secrets";

/**
 * Local development is what `.dev.vars` says, never wrangler.toml: wrangler reads `.dev.vars` for `wrangler dev`
 * only and never deploys it, so no deployed Worker (production, staging, or the top-level config deployed by
 * hand) can claim to be local by accident.
 */
export function isLocalDevelopment(env: object): boolean {
  return secretValue(env, "LOCAL_DEVELOPMENT") === "true";
}
