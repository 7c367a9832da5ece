import { handlerNames } from "../handlers/registry";
import { adapterFor, knownProviderNames } from "../providers/registry";
import { orderingValue } from "../routing/ordering";
import { bodySegments, DEFAULT_R2_BODY_THRESHOLD, r2BodyThreshold } from "./body-threshold";
import {
  DEFAULT_DATABASE_BINDING,
  type ParseContext,
  parseSourceTables,
  type SourceConfig,
  SourceConfigError,
  type SourceTables,
} from "./config";
import { hasD1Binding } from "./d1-binding";
import { isPartitioned, partitionProblems } from "./partitions";
import { catchUpSettings } from "./reconciler-settings";

/**
 * The deployed sources, each checked on its own: a broken `[vars.SOURCES.<name>]` table takes only that source
 * out of service (its deliveries answer 503 so the sender retries); every other source keeps accepting.
 */

/** What this build knows when it checks a source table: its providers, its handlers, each provider's own options. */
export function sourceParseContext(): ParseContext {
  return {
    knownProviders: knownProviderNames(),
    knownHandlers: handlerNames(),
    validateProviderOptions: (provider, options) => adapterFor(provider)?.validateOptions?.(options) ?? [],
  };
}

/** Parsed once per isolate when every table is valid: the SOURCES var is fixed for a deployment. */
let cached: { raw: unknown; tables: SourceTables } | undefined;

function loadTables(env: Pick<Env, "SOURCES">): SourceTables {
  if (cached && cached.raw === env.SOURCES) return cached.tables;
  const tables = parseSourceTables(env.SOURCES, sourceParseContext());
  // The reconciler's settings live in the same tables: a bad catch_up fails loudly here, at first use after a
  // deploy, instead of only as a failure in each cron run's record.
  // The receipt partitions weigh every valid source at once (the longest retention, who names a ring database).
  const ringProblems = partitionProblems(env, [...tables.sources.values()]);
  for (const source of [...tables.sources.values()]) {
    const settings = catchUpSettings(source);
    const problems = settings && !settings.ok ? [...settings.problems] : [];
    // A database the Worker has no binding for would fail every relay; refused here, the source alone answers 503.
    // `DB` itself is not checked: without it nothing works at all, and a stand-in for it is not refused.
    if (source.database !== DEFAULT_DATABASE_BINDING && !isPartitioned(source) && !hasD1Binding(env, source.database)) {
      problems.push(
        `SOURCES.${source.name}: database ${JSON.stringify(source.database)} is not a D1 binding of this Worker (add a [[d1_databases]] entry with binding = "${source.database}")`,
      );
    }
    problems.push(...(ringProblems.get(source.name) ?? []));
    if (problems.length > 0) {
      tables.sources.delete(source.name);
      tables.problems.set(source.name, problems);
    }
  }
  // A broken parse is not kept: handlers can be registered later in the isolate's life (tests do), and redoing
  // the parse is cheap next to a delivery that cannot be accepted anyway.
  if (tables.problems.size === 0) cached = { raw: env.SOURCES, tables };
  return tables;
}

/**
 * The valid sources, by name. A broken source is absent here and present in `sourceProblems`. Throws a
 * SourceConfigError only when SOURCES itself is not a table.
 */
export function loadSources(env: Pick<Env, "SOURCES">): Map<string, SourceConfig> {
  return loadTables(env).sources;
}

/** Each broken source with every problem of its table; empty when all are valid. */
export function sourceProblems(env: Pick<Env, "SOURCES">): Map<string, string[]> {
  return loadTables(env).problems;
}

export type SourceLookup =
  | { kind: "valid"; source: SourceConfig }
  /** Configured, but its table is broken: answer 503 and keep its work, the fix is a redeploy away. */
  | { kind: "invalid"; problems: string[] }
  | { kind: "unknown" };

/** One source by name, telling "not configured" apart from "configured but broken". */
export function lookupSource(env: Pick<Env, "SOURCES">, name: string): SourceLookup {
  const tables = loadTables(env);
  const source = tables.sources.get(name);
  if (source) return { kind: "valid", source };
  const problems = tables.problems.get(name);
  return problems ? { kind: "invalid", problems } : { kind: "unknown" };
}

/** What operators see (the admin API, the dashboard, /health): never throws, whatever SOURCES holds. */
export interface SourcesHealth {
  /** Valid sources, accepting deliveries. */
  valid: string[];
  /** Broken sources, answering 503, each with every problem of its table. */
  invalid: Record<string, string[]>;
  /** Set when SOURCES itself is unreadable: then no source accepts anything. */
  unreadable: string[] | null;
}

export function sourcesHealth(env: Pick<Env, "SOURCES">): SourcesHealth {
  try {
    const tables = loadTables(env);
    return {
      valid: [...tables.sources.keys()].sort(),
      invalid: Object.fromEntries([...tables.problems].sort(([a], [b]) => a.localeCompare(b))),
      unreadable: null,
    };
  } catch (error) {
    if (error instanceof SourceConfigError) return { valid: [], invalid: {}, unreadable: error.problems };
    throw error;
  }
}

/** Each source's R2 body threshold by name, for the relay; a source no longer configured gets the default. */
export function bodyThresholdOf(env: Pick<Env, "SOURCES">): (source: string) => number {
  return (name) => {
    const found = lookupSource(env, name);
    return found.kind === "valid"
      ? r2BodyThreshold(found.source.options as Record<string, unknown>)
      : DEFAULT_R2_BODY_THRESHOLD;
  };
}

/** Whether each source's bodies go to R2 segments (`body_segments`), for the relay; a source no longer configured: no. */
export function bodySegmentsOf(env: Pick<Env, "SOURCES">): (source: string) => boolean {
  return (name) => {
    const found = lookupSource(env, name);
    return found.kind === "valid" && bodySegments(found.source.options as Record<string, unknown>);
  };
}

/**
 * An event's value for its source's ordered routes (docs/routing.md "Ordering"; they all order by one value), for the
 * relay to store with the receipt; null for a source without one (or no longer valid), so such a source pays nothing
 * for ordering.
 */
export function orderingKeyOf(
  env: Pick<Env, "SOURCES">,
  event: { source: string; subjectId: string | null; body: ArrayBuffer | null },
): string | null {
  const found = lookupSource(env, event.source);
  const ordering =
    found.kind === "valid" ? (found.source.routes.find(({ rules }) => rules.ordering)?.rules.ordering ?? null) : null;
  if (!ordering) return null;
  return orderingValue(ordering, {
    subjectId: event.subjectId,
    body: event.body ? new Uint8Array(event.body) : null,
  });
}
