import { handlerNames } from "../../src/handlers/registry";
import { knownProviderNames } from "../../src/providers/registry";
import { parseSource, type SourceConfig } from "../../src/sources/config";

/** What a source table is checked against: the providers and handlers this build has. */
export const context = { knownProviders: knownProviderNames(), knownHandlers: handlerNames() };
/** The smallest valid table; each test adds the options it is about. */
export const base = { provider: "standard-webhooks", secrets: ["S"] };

/** The parsed source of `base` plus `extra`; throws with the problems if the table is refused. */
export function parsed(extra: Record<string, unknown>): SourceConfig {
  const result = parseSource("example", { ...base, ...extra }, context);
  if (!result.ok) throw new Error(`unexpected problems: ${result.problems.join("; ")}`);
  return result.source;
}

/** The problems config load names for `base` plus `extra` (none when it is accepted). */
export function problemsOf(extra: Record<string, unknown>): string[] {
  const result = parseSource("example", { ...base, ...extra }, context);
  return result.ok ? [] : result.problems;
}
