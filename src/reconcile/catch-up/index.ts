import { secretValue } from "../../lib/secrets";
import type { SourceConfig } from "../../sources/config";
import type { CatchUpSettings } from "../../sources/reconciler-settings";
import type { CatchUpCounts } from "./claim-missing";
import { catchUpGithub } from "./github";
import { catchUpStripe } from "./stripe";

export type { CatchUpCounts } from "./claim-missing";

/** Runs the source's provider catch-up. A missing API key secret is a deploy mistake: reported, nothing fetched. */
export async function catchUp(
  env: Env,
  source: SourceConfig,
  settings: CatchUpSettings,
  now: number,
): Promise<CatchUpCounts> {
  const apiKey = secretValue(env, settings.apiKeySecret);
  if (apiKey === null) {
    throw new Error(`secret ${settings.apiKeySecret} named by catch_up.api_key_secret is not set`);
  }
  switch (settings.api) {
    case "stripe":
      return catchUpStripe(env, source, settings, apiKey, now);
    case "github":
      return catchUpGithub(env, source, settings, apiKey, now);
  }
}
