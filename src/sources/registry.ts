import { handlerNames } from "../consumers/handlers/registry";
import { adapterFor, knownProviderNames } from "../providers/registry";
import { catchUpSettings } from "../reconcile/settings";
import { parseSources, SourceConfigError, type SourceConfig } from "./config";

/** Parsed once per isolate: the SOURCES var is fixed for a deployment. */
let cached: { raw: unknown; sources: Map<string, SourceConfig> } | undefined;

export function loadSources(env: Pick<Env, "SOURCES">): Map<string, SourceConfig> {
  if (cached && cached.raw === env.SOURCES) return cached.sources;
  const sources = parseSources(env.SOURCES, {
    knownProviders: knownProviderNames(),
    knownHandlers: handlerNames(),
    validateProviderOptions: (provider, options) => adapterFor(provider)?.validateOptions?.(options) ?? [],
  });
  // The reconciler's settings live in the same tables: a bad catch_up fails loudly here, at first use after a
  // deploy, instead of only as a failure in each cron run's record.
  const problems = [...sources.values()].flatMap((source) => {
    const settings = catchUpSettings(source);
    return settings && !settings.ok ? settings.problems : [];
  });
  if (problems.length > 0) throw new SourceConfigError(problems);
  cached = { raw: env.SOURCES, sources };
  return sources;
}
