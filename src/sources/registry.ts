import { handlerNames } from "../consumers/handlers/registry";
import { adapterFor, knownProviderNames } from "../providers/registry";
import { parseSources, type SourceConfig } from "./config";

/** Parsed once per isolate: the SOURCES var is fixed for a deployment. */
let cached: { raw: unknown; sources: Map<string, SourceConfig> } | undefined;

export function loadSources(env: Pick<Env, "SOURCES">): Map<string, SourceConfig> {
  if (cached && cached.raw === env.SOURCES) return cached.sources;
  const sources = parseSources(env.SOURCES, {
    knownProviders: knownProviderNames(),
    knownHandlers: handlerNames(),
    validateProviderOptions: (provider, options) => adapterFor(provider)?.validateOptions?.(options) ?? [],
  });
  cached = { raw: env.SOURCES, sources };
  return sources;
}
