import * as v from "valibot";
import { parseDuration } from "../lib/duration";
import { likelyMeant } from "../lib/likely-meant";
import { secretValue } from "../lib/secrets";
import type { SourceOptions, SourceSecret } from "../providers/types";
import type { RouteRules } from "../routing/route";
import {
  DEFAULT_MAX_BODY_BYTES,
  type DestinationTarget,
  type RetryTable,
  type SecretRef,
  SOURCE_NAME,
} from "./config-schema";
import { parseRoutes, routeWhere } from "./routes";
import { type SourceTable, SourceTableSchema, unknownKeyProblems } from "./source-schema";

export {
  DEFAULT_MAX_BODY_BYTES,
  forwardUrlProblem,
  JURISDICTIONS,
  LOCATION_HINTS,
  MAX_BODY_BYTES_LIMIT,
  MAX_DESTINATION_TIMEOUT_MS,
  PROCESSING_LEASE_MS,
  type SecretRef,
} from "./config-schema";
export { parseDuration };

/**
 * Sources are declared in wrangler.toml under [vars.SOURCES.<name>]; adding one is a config change, never a
 * code change. This module turns that table into checked, typed settings once per isolate: SourceTableSchema
 * (./source-schema.ts) reads each key, then the defaults, inheritance and cross-key checks below resolve it.
 * The types here are what resolution makes; the table's own types are the schema's (v.InferOutput).
 */

export interface RetryPolicy {
  baseDelaySeconds: number;
  maxDelaySeconds: number;
  maxRetries: number;
  /** ±fraction of each delay, so a burst of failures does not retry in lockstep. */
  jitter: number;
  /** No retry is scheduled once the receipt is this old (since it was received): it goes dead instead. */
  maxAgeMs: number;
}

/** Where a route's deliveries go: a forward (to a URL or a listener) carries the source's `forward_timeout`. */
export type Destination =
  | Exclude<DestinationTarget, { kind: "forward" | "listen" }>
  | (Extract<DestinationTarget, { kind: "forward" | "listen" }> & { timeoutMs: number });

/**
 * Whether an attempt to this destination may act outside D1 before it commits (a forward to a URL or to a listener):
 * only those take a lease up front and may carry route headers.
 */
export function reachesOutsideD1(destination: Destination | undefined): boolean {
  return destination?.kind === "forward" || destination?.kind === "listen";
}

/** One route of a source: where its deliveries go, the rules applied first, and how a failed one is retried. */
export interface SourceRoute {
  destination: Destination;
  rules: RouteRules;
  /** The route's own `retry` table, key by key over the source's; the source's own when the route sets none. */
  retry: RetryPolicy;
}

export interface SourceConfig {
  name: string;
  provider: string;
  secrets: readonly SecretRef[];
  /**
   * Every route, in config order (src/sources/routes.ts): each has a destination and the name, filter, schema and
   * transform applied before it sees an event. One, `default`, for a source that names its destination directly.
   */
  routes: readonly SourceRoute[];
  /** The first route's destination and rules: the one a one-route source has. */
  destination: Destination;
  route: RouteRules;
  maxBodyBytes: number;
  /** Silence alert threshold in ms, when the source is expected to be busy. */
  expectWithinMs: number | null;
  /** The source's `retry` table: what a route without its own applies (read a delivery's with retryPolicyOf). */
  retry: RetryPolicy;
  payloadRetentionMs: number;
  dedupeRetentionMs: number;
  /**
   * How long a dead letter keeps its body (since it was received), so it can still be replayed: the key's own
   * lifetime unless `dead_letter_retention` says less. Dismissing it hands the body back to payload retention.
   */
  deadLetterRetentionMs: number;
  /** Where this source's claim shards are created (see "Where shards live" in docs/architecture.md). */
  placement: ShardPlacement;
  /** The D1 binding that holds this source's receipts, attempts and handler effects (`DB` unless `database` says). */
  database: string;
  options: SourceOptions;
}

/**
 * `location_hint` only steers where a shard is created the first time; `jurisdiction` is part of the shard's id,
 * so the object can only ever live (and its data only ever be stored) inside that jurisdiction.
 */
export interface ShardPlacement {
  locationHint: DurableObjectLocationHint | null;
  jurisdiction: DurableObjectJurisdiction | null;
}

const DAY_MS = 86_400_000;
/** Three days: longer than the default schedule's 34 hours, and as long as Stripe's own automatic retries. */
export const DEFAULT_RETRY: RetryPolicy = {
  baseDelaySeconds: 30,
  maxDelaySeconds: 86_400,
  maxRetries: 12,
  jitter: 0.2,
  maxAgeMs: 3 * DAY_MS,
};
/** Stripe's CLI resends for 30 days; keys must outlive every resend. */
export const DEFAULT_DEDUPE_RETENTION_MS = 35 * DAY_MS;
export const DEFAULT_PAYLOAD_RETENTION_MS = 7 * DAY_MS;
const DEFAULT_FORWARD_TIMEOUT_MS = 10_000;

export class SourceConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid SOURCES configuration: ${problems.join("; ")}`);
    this.name = "SourceConfigError";
  }
}

/** The binding every source uses unless its table names another: also where system-wide tables live. */
export const DEFAULT_DATABASE_BINDING = "DB";

const isTable = (value: unknown): value is Record<string, unknown> =>
  !!value && typeof value === "object" && !Array.isArray(value);

/** A schema issue as a problem line: the source (and the route, for a key of one) in front of the key's message. */
function issueProblem(issue: v.BaseIssue<unknown>, where: string, options: SourceOptions): string {
  const keys = issue.path?.map(({ key }) => key) ?? [];
  if (keys[0] === "routes" && typeof keys[1] === "number" && Array.isArray(options.routes)) {
    return `${routeWhere(where, keys[1], options.routes[keys[1]])}: ${issue.message}`;
  }
  return `${where}: ${issue.message}`;
}

/**
 * Takes every refused value out of the parsed table (in place: it is the parser's own copy), so what is resolved
 * after it sees a refused key as unset and falls back to its default instead of reading the raw value.
 */
function dropRefused(table: unknown, issues: readonly v.BaseIssue<unknown>[]): void {
  for (const issue of issues) {
    const keys = issue.path?.map(({ key }) => key) ?? [];
    let parent: unknown = table;
    for (const key of keys.slice(0, -1))
      parent =
        isTable(parent) || Array.isArray(parent) ? (parent as Record<PropertyKey, unknown>)[key as PropertyKey] : null;
    const last = keys.at(-1) as string | number | undefined;
    if (last === undefined) continue;
    if (Array.isArray(parent)) parent[last as number] = undefined;
    else if (isTable(parent)) delete parent[last as string];
  }
}

/** A `retry` table read over the policy it refines (DEFAULT_RETRY for a source's, the source's for a route's). */
function resolveRetry(own: RetryTable | undefined, inherited: RetryPolicy): RetryPolicy {
  if (!own) return inherited;
  return {
    baseDelaySeconds: own.base_delay_seconds ?? inherited.baseDelaySeconds,
    maxDelaySeconds: own.max_delay_seconds ?? inherited.maxDelaySeconds,
    maxRetries: own.max_retries ?? inherited.maxRetries,
    jitter: own.jitter ?? inherited.jitter,
    maxAgeMs: own.max_age ?? inherited.maxAgeMs,
  };
}

/** The three retentions weighed against each other: a dead letter's body lives between the payload and the key. */
function retentionProblems(table: SourceTable, dedupeMs: number, payloadMs: number): string[] {
  const problems: string[] = [];
  if (payloadMs > dedupeMs) problems.push("payload_retention cannot outlast dedupe_retention");
  const deadLetterMs = table.dead_letter_retention;
  // Unset, it is the key's lifetime, which the payload_retention check above already holds against.
  if (deadLetterMs !== undefined && deadLetterMs > dedupeMs)
    problems.push("dead_letter_retention cannot outlast dedupe_retention");
  if (deadLetterMs !== undefined && deadLetterMs < payloadMs)
    problems.push("dead_letter_retention cannot be shorter than payload_retention");
  return problems;
}

/**
 * The retry policy of one delivery of `source`: the named route's (null names the first route, the one a one-route
 * source's receipt carries without naming it), or the source's own when that route is no longer configured.
 */
export function retryPolicyOf(source: SourceConfig, route: string | null): RetryPolicy;
export function retryPolicyOf(source: SourceConfig | undefined, route: string | null): RetryPolicy | undefined;
export function retryPolicyOf(source: SourceConfig | undefined, route: string | null): RetryPolicy | undefined {
  if (!source) return undefined;
  const configured = route === null ? source.routes[0] : source.routes.find(({ rules }) => rules.name === route);
  return configured?.retry ?? source.retry;
}

export interface ParseContext {
  /** Provider names an adapter exists for; anything else fails validation instead of accepting traffic. */
  knownProviders: ReadonlySet<string>;
  /** Handler names registered in code. */
  knownHandlers: ReadonlySet<string>;
  validateProviderOptions?: (provider: string, options: SourceOptions) => string[];
}

/** One source's table, checked: the settings when it is valid, every problem found otherwise. */
export type ParsedSource = { ok: true; source: SourceConfig } | { ok: false; problems: string[] };

/**
 * Reads one table with SourceTableSchema (./source-schema.ts), then resolves what the schema cannot know alone:
 * the provider and handlers this build has, defaults and inheritance, and the keys weighed against each other.
 */
export function parseSource(name: string, value: unknown, context: ParseContext): ParsedSource {
  const where = `SOURCES.${name}`;
  const problems: string[] = [];
  if (!SOURCE_NAME.test(name)) problems.push(`${where}: name must match ${SOURCE_NAME}`);
  if (!isTable(value)) return { ok: false, problems: [...problems, `${where}: must be a table`] };
  const options = value as SourceOptions;
  const provider = options.provider;
  if (typeof provider !== "string" || !context.knownProviders.has(provider)) {
    const meant = typeof provider === "string" ? likelyMeant(provider, [...context.knownProviders]) : null;
    return {
      ok: false,
      problems: [
        ...problems,
        `${where}: unsupported provider ${JSON.stringify(provider)}${meant ? ` (did you mean "${meant}"?)` : ""}`,
      ],
    };
  }
  const checked = v.safeParse(SourceTableSchema, options, { abortPipeEarly: true });
  const table = checked.output as SourceTable;
  if (!checked.success) {
    problems.push(...checked.issues.map((issue) => issueProblem(issue, where, options)));
    dropRefused(table, checked.issues);
  }
  problems.push(...unknownKeyProblems(options).map((problem) => `${where}: ${problem}`));
  const retry = resolveRetry(table.retry, DEFAULT_RETRY);
  const timeoutMs = table.forward_timeout ?? DEFAULT_FORWARD_TIMEOUT_MS;
  const routes: SourceRoute[] = parseRoutes(
    options,
    table,
    where,
    problems,
    (target): Destination =>
      target?.kind === "forward" || target?.kind === "listen" ? { ...target, timeoutMs } : (target ?? { kind: "none" }),
    (own) => resolveRetry(own, retry),
  );
  for (const { destination, rules: route } of routes) {
    if (route.headers && !reachesOutsideD1(destination))
      problems.push(`${where}: route ${route.name}: headers apply to a forward (an https destination) only`);
    if (destination.kind === "handler" && !context.knownHandlers.has(destination.handlerName)) {
      problems.push(`${where}: no handler named ${JSON.stringify(destination.handlerName)} is registered`);
    }
  }
  const { destination, rules: route } = routes[0]!;
  const dedupeRetentionMs = table.dedupe_retention ?? DEFAULT_DEDUPE_RETENTION_MS;
  const payloadRetentionMs = table.payload_retention ?? DEFAULT_PAYLOAD_RETENTION_MS;
  problems.push(...retentionProblems(table, dedupeRetentionMs, payloadRetentionMs).map((p) => `${where}: ${p}`));
  problems.push(...(context.validateProviderOptions?.(provider, options) ?? []).map((p) => `${where}: ${p}`));
  if (problems.length > 0) return { ok: false, problems };
  return {
    ok: true,
    source: {
      name,
      provider,
      secrets: table.secrets,
      routes,
      destination,
      route,
      maxBodyBytes: table.max_body_bytes ?? DEFAULT_MAX_BODY_BYTES,
      expectWithinMs: table.expect_within ?? null,
      retry,
      payloadRetentionMs,
      dedupeRetentionMs,
      deadLetterRetentionMs: table.dead_letter_retention ?? dedupeRetentionMs,
      placement: { locationHint: table.location_hint ?? null, jurisdiction: table.jurisdiction ?? null },
      database: table.database ?? DEFAULT_DATABASE_BINDING,
      options,
    },
  };
}

/** Every source checked on its own: one broken table does not stop the others. */
export interface SourceTables {
  sources: Map<string, SourceConfig>;
  /** Per broken source, every problem found in its table. */
  problems: Map<string, string[]>;
}

/**
 * Checks each `[vars.SOURCES.<name>]` table on its own. Throws only when SOURCES itself is not a table: then no
 * source can be told apart from another.
 */
export function parseSourceTables(raw: unknown, context: ParseContext): SourceTables {
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) {
    throw new SourceConfigError(["SOURCES must be a table of sources"]);
  }
  const tables: SourceTables = { sources: new Map(), problems: new Map() };
  for (const [name, value] of Object.entries(raw as Record<string, unknown>)) {
    const parsed = parseSource(name, value, context);
    if (parsed.ok) tables.sources.set(name, parsed.source);
    else tables.problems.set(name, parsed.problems);
  }
  return tables;
}

/** All or nothing: the valid sources, or a SourceConfigError naming every problem of every source at once. */
export function parseSources(raw: unknown, context: ParseContext): Map<string, SourceConfig> {
  const { sources, problems } = parseSourceTables(raw, context);
  if (problems.size > 0) throw new SourceConfigError([...problems.values()].flat());
  return sources;
}

/**
 * The secrets a delivery may be verified with right now. A name listed in config, not yet expired, but absent from
 * the Worker's secrets is a deploy mistake, reported as such (the caller answers 503 so the sender retries).
 */
export function usableSecrets(
  source: SourceConfig,
  env: object,
  now: number,
): { secrets: SourceSecret[]; missing: string[] } {
  const secrets: SourceSecret[] = [];
  const missing: string[] = [];
  for (const ref of source.secrets) {
    // Past its expires, a secret is neither usable nor missing: leaving it unset is the end of a rotation.
    if (ref.expiresAt !== null && now >= ref.expiresAt) continue;
    const value = secretValue(env, ref.name);
    if (value === null) {
      missing.push(ref.name);
      continue;
    }
    secrets.push({ name: ref.name, value });
  }
  return { secrets, missing };
}
