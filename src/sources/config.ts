import { parseDuration } from "../lib/duration";
import { likelyMeant } from "../lib/likely-meant";
import { secretValue } from "../lib/secrets";
import type { SourceOptions, SourceSecret } from "../providers/types";
import type { RouteRules } from "../routing/route";
import { bodySegmentsProblem, r2BodyThresholdProblem } from "./body-threshold";
import { expectedRateProblem } from "./expected-rate";
import { parseRoutes } from "./routes";

export { parseDuration };

/**
 * Sources are declared in wrangler.toml under [vars.SOURCES.<name>]; adding one is a config change, never a
 * code change. This module turns that table into checked, typed settings once per isolate.
 */

export interface SecretRef {
  /** The Worker secret's name (`wrangler secret put NAME`); the value never appears in config. */
  name: string;
  /** After this instant (epoch ms) the secret is refused: the end of a rotation's overlap. */
  expiresAt: number | null;
}

export interface RetryPolicy {
  baseDelaySeconds: number;
  maxDelaySeconds: number;
  maxRetries: number;
  /** ±fraction of each delay, so a burst of failures does not retry in lockstep. */
  jitter: number;
  /** No retry is scheduled once the receipt is this old (since it was received): it goes dead instead. */
  maxAgeMs: number;
}

export type Destination =
  | { kind: "handler"; handlerName: string }
  | { kind: "forward"; url: string; timeoutMs: number }
  | { kind: "none" };

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

/** Cloudflare's documented Durable Object location hints. */
export const LOCATION_HINTS: readonly DurableObjectLocationHint[] = [
  "wnam",
  "enam",
  "sam",
  "weur",
  "eeur",
  "apac",
  "oc",
  "afr",
  "me",
];
export const JURISDICTIONS: readonly DurableObjectJurisdiction[] = ["eu", "fedramp", "fedramp-high"];

export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;
/**
 * The largest cap a source may set. D1 and Durable Object SQLite both refuse a row over 2,000,000 bytes, and the
 * body shares its row with the key, hash and kept headers: a larger cap would accept deliveries the claim shard
 * cannot store (503 forever) or the relay cannot move into D1. Local workerd does not enforce that limit, so
 * this check is the only place it is caught before production.
 */
export const MAX_BODY_BYTES_LIMIT = 1_900_000;
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
/**
 * The processing lease: a receipt whose lease has run out is handed to another consumer. src/consumers/lease/lease.ts
 * takes it as LEASE_MS; it is defined here so configuration never imports the consumer.
 */
export const PROCESSING_LEASE_MS = 5 * 60_000;
/**
 * The longest any call to a destination (a forward, a handler's external call) may wait. One minute below the
 * lease, so a call that times out still leaves time to record its attempt before the lease can pass to a second
 * consumer; a longer timeout would let two attempts of one receipt run at once.
 */
export const MAX_DESTINATION_TIMEOUT_MS = PROCESSING_LEASE_MS - 60_000;

export class SourceConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid SOURCES configuration: ${problems.join("; ")}`);
    this.name = "SourceConfigError";
  }
}

const SOURCE_NAME = /^[a-z0-9][a-z0-9_-]{0,63}$/;

/** The binding every source uses unless its table names another: also where system-wide tables live. */
export const DEFAULT_DATABASE_BINDING = "DB";
/** A Worker binding name as wrangler accepts it (a JavaScript identifier). */
const BINDING_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

function databaseBinding(value: unknown, where: string, problems: string[]): string {
  if (value === undefined) return DEFAULT_DATABASE_BINDING;
  if (typeof value === "string" && BINDING_NAME.test(value)) return value;
  problems.push(
    `${where}: database must name a D1 binding of this Worker, such as "DB_EU" (got ${JSON.stringify(value)})`,
  );
  return DEFAULT_DATABASE_BINDING;
}

function parseSecretRef(entry: unknown, where: string, problems: string[]): SecretRef | null {
  if (typeof entry === "string" && entry.length > 0) return { name: entry, expiresAt: null };
  if (entry && typeof entry === "object" && typeof (entry as { name?: unknown }).name === "string") {
    const { name, expires } = entry as { name: string; expires?: unknown };
    if (expires === undefined) return { name, expiresAt: null };
    const expiresAt = typeof expires === "string" ? Date.parse(expires) : NaN;
    if (Number.isNaN(expiresAt)) {
      problems.push(`${where}: secret ${name} has an unreadable expires (want an ISO date)`);
      return null;
    }
    return { name, expiresAt };
  }
  problems.push(`${where}: each secret is a name or { name, expires }`);
  return null;
}

/**
 * A duration key of the source table: absent → the default; present but unreadable or out of range → a problem.
 * Never a silent fallback: a typo such as "3 days" must not quietly become the default.
 */
function durationSetting(
  value: unknown,
  fallback: number,
  where: string,
  problems: string[],
  bounds: { positive?: boolean; max?: number; maxText?: string } = {},
): number {
  if (value === undefined) return fallback;
  const parsed = parseDuration(value);
  if (parsed === null) {
    problems.push(`${where} must be a duration like "90s", "15m", "1h" or "3d" (got ${JSON.stringify(value)})`);
    return fallback;
  }
  if (bounds.positive && parsed <= 0) {
    problems.push(`${where} must be longer than zero`);
    return fallback;
  }
  if (bounds.max !== undefined && parsed > bounds.max) {
    problems.push(`${where} must be at most ${bounds.maxText ?? `${bounds.max} ms`}`);
    return fallback;
  }
  return parsed;
}

function parseDestination(value: unknown, where: string, options: SourceOptions, problems: string[]): Destination {
  // Read even when the destination is not a forward: a bad value is a mistake worth reporting either way.
  const timeoutMs = durationSetting(
    options.forward_timeout,
    DEFAULT_FORWARD_TIMEOUT_MS,
    `${where}: forward_timeout`,
    problems,
    {
      positive: true,
      max: MAX_DESTINATION_TIMEOUT_MS,
      maxText: `${MAX_DESTINATION_TIMEOUT_MS / 60_000}m, to end inside the ${PROCESSING_LEASE_MS / 60_000}-minute processing lease (a longer call would overlap the next consumer's attempt)`,
    },
  );
  if (value === undefined || value === "none") return { kind: "none" };
  if (typeof value !== "string") {
    problems.push(`${where}: destination must be "handler:<name>", an https URL or "none"`);
    return { kind: "none" };
  }
  if (value.startsWith("handler:") && value.length > "handler:".length) {
    return { kind: "handler", handlerName: value.slice("handler:".length) };
  }
  if (/^https?:\/\//i.test(value)) {
    const problem = forwardUrlProblem(value);
    if (problem === null) return { kind: "forward", url: value, timeoutMs };
    problems.push(`${where}: destination ${JSON.stringify(value)} ${problem}`);
    return { kind: "none" };
  }
  problems.push(`${where}: destination ${JSON.stringify(value)} is neither handler:<name> nor a URL`);
  return { kind: "none" };
}

/** 127.0.0.0/8, localhost (and its subdomains) and [::1]: hosts only the machine itself can reach. */
function isLoopbackHost(hostname: string): boolean {
  return (
    /^127(\.\d{1,3}){3}$/.test(hostname) ||
    hostname === "localhost" ||
    hostname.endsWith(".localhost") ||
    hostname === "[::1]"
  );
}

/**
 * Why a forward URL cannot be used, or null. Events leave the receiver signed but readable, so only https: plain
 * http is allowed to a loopback address alone, which is local development (`npm run cli -- echo`, test
 * stand-ins); a deployed Worker can reach no loopback address, so that exception opens nothing in production.
 */
export function forwardUrlProblem(value: string): string | null {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return "is not a valid URL";
  }
  if (url.protocol === "https:") return null;
  if (url.protocol === "http:" && isLoopbackHost(url.hostname)) return null;
  return "must be an https URL (plain http only to a loopback address such as http://127.0.0.1:8080, for local development)";
}

function positiveNumber(value: unknown, fallback: number, where: string, problems: string[]): number {
  if (value === undefined) return fallback;
  if (typeof value === "number" && Number.isFinite(value) && value > 0) return value;
  problems.push(`${where} must be a positive number`);
  return fallback;
}

/** A count such as max_retries: 2.5 retries means nothing, and rounding it either way would be a guess. */
function wholeCount(value: unknown, fallback: number, where: string, problems: string[]): number {
  if (value === undefined) return fallback;
  if (typeof value === "number" && Number.isSafeInteger(value) && value >= 0) return value;
  problems.push(`${where} must be a whole number, 0 or more (got ${JSON.stringify(value)})`);
  return fallback;
}

/** A share between 0 and 1 inclusive (retry jitter: 0.2 means ±20 %). */
function fraction(value: unknown, fallback: number, where: string, problems: string[]): number {
  if (value === undefined) return fallback;
  if (typeof value === "number" && Number.isFinite(value) && value >= 0 && value <= 1) return value;
  problems.push(`${where} must be a number from 0 to 1`);
  return fallback;
}

function bodyCap(value: unknown, where: string, problems: string[]): number {
  const cap = positiveNumber(value, DEFAULT_MAX_BODY_BYTES, where, problems);
  if (!Number.isInteger(cap) || cap > MAX_BODY_BYTES_LIMIT) {
    problems.push(`${where} must be a whole number of bytes up to ${MAX_BODY_BYTES_LIMIT}`);
    return DEFAULT_MAX_BODY_BYTES;
  }
  return cap;
}

/**
 * A `retry` table. A source's is read over DEFAULT_RETRY; a route's over its source's, so a route names only what
 * it changes. `keyWhere` says where each key is, for the problems.
 */
function parseRetry(
  value: unknown,
  where: string,
  problems: string[],
  inherited: RetryPolicy = DEFAULT_RETRY,
  keyWhere: (key: string) => string = (key) => `${where}.retry.${key}`,
): RetryPolicy {
  if (value === undefined) return inherited;
  if (!value || typeof value !== "object" || Array.isArray(value)) {
    problems.push(`${where}: retry must be a table`);
    return inherited;
  }
  const table = value as Record<string, unknown>;
  return {
    baseDelaySeconds: positiveNumber(
      table.base_delay_seconds,
      inherited.baseDelaySeconds,
      keyWhere("base_delay_seconds"),
      problems,
    ),
    maxDelaySeconds: positiveNumber(
      table.max_delay_seconds,
      inherited.maxDelaySeconds,
      keyWhere("max_delay_seconds"),
      problems,
    ),
    maxRetries: wholeCount(table.max_retries, inherited.maxRetries, keyWhere("max_retries"), problems),
    jitter: fraction(table.jitter, inherited.jitter, keyWhere("jitter"), problems),
    maxAgeMs: durationSetting(table.max_age, inherited.maxAgeMs, keyWhere("max_age"), problems, { positive: true }),
  };
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

/** One of a fixed set of words, or absent. */
function oneOf<T extends string>(value: unknown, allowed: readonly T[], where: string, problems: string[]): T | null {
  if (value === undefined) return null;
  if (typeof value === "string" && (allowed as readonly string[]).includes(value)) return value as T;
  problems.push(`${where} must be one of ${allowed.join(", ")} (got ${JSON.stringify(value)})`);
  return null;
}

function parsePlacement(options: SourceOptions, where: string, problems: string[]): ShardPlacement {
  return {
    locationHint: oneOf(options.location_hint, LOCATION_HINTS, `${where}: location_hint`, problems),
    jurisdiction: oneOf(options.jurisdiction, JURISDICTIONS, `${where}: jurisdiction`, problems),
  };
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

export function parseSource(name: string, value: unknown, context: ParseContext): ParsedSource {
  const where = `SOURCES.${name}`;
  const problems: string[] = [];
  if (!SOURCE_NAME.test(name)) problems.push(`${where}: name must match ${SOURCE_NAME}`);
  if (!value || typeof value !== "object" || Array.isArray(value)) {
    return { ok: false, problems: [...problems, `${where}: must be a table`] };
  }
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
  const secretList = options.secrets;
  const secrets: SecretRef[] = [];
  if (!Array.isArray(secretList) || secretList.length === 0) {
    problems.push(`${where}: secrets must name at least one Worker secret`);
  } else {
    for (const entry of secretList) {
      const ref = parseSecretRef(entry, where, problems);
      if (ref) secrets.push(ref);
    }
  }
  const retry = parseRetry(options.retry, where, problems);
  const routes: SourceRoute[] = parseRoutes(
    options,
    where,
    problems,
    (value, routeWhere) => parseDestination(value, routeWhere, options, problems),
    (value, routeWhere) => parseRetry(value, routeWhere, problems, retry, (key) => `${routeWhere}: retry.${key}`),
  );
  for (const { destination, rules: route } of routes) {
    if (route.headers && destination.kind !== "forward")
      problems.push(`${where}: route ${route.name}: headers apply to a forward (an https destination) only`);
    if (destination.kind === "handler" && !context.knownHandlers.has(destination.handlerName)) {
      problems.push(`${where}: no handler named ${JSON.stringify(destination.handlerName)} is registered`);
    }
  }
  const { destination, rules: route } = routes[0]!;
  const expectWithin = durationSetting(options.expect_within, -1, `${where}: expect_within`, problems, {
    positive: true,
  });
  // Read by the reconciler (src/sources/reconciler-settings.ts); checked here so a typo is refused with everything else.
  durationSetting(options.alert_pending_after, 0, `${where}: alert_pending_after`, problems, { positive: true });
  const dedupeRetentionMs = durationSetting(
    options.dedupe_retention,
    DEFAULT_DEDUPE_RETENTION_MS,
    `${where}: dedupe_retention`,
    problems,
    { positive: true },
  );
  const payloadRetentionMs = durationSetting(
    options.payload_retention,
    DEFAULT_PAYLOAD_RETENTION_MS,
    `${where}: payload_retention`,
    problems,
    { positive: true },
  );
  if (payloadRetentionMs > dedupeRetentionMs) {
    problems.push(`${where}: payload_retention cannot outlast dedupe_retention`);
  }
  const deadLetterRetentionMs = durationSetting(
    options.dead_letter_retention,
    dedupeRetentionMs,
    `${where}: dead_letter_retention`,
    problems,
    { positive: true },
  );
  // Unset, it is the key's lifetime, which the payload_retention check above already holds against.
  if (options.dead_letter_retention !== undefined && deadLetterRetentionMs > dedupeRetentionMs) {
    problems.push(`${where}: dead_letter_retention cannot outlast dedupe_retention`);
  }
  if (options.dead_letter_retention !== undefined && deadLetterRetentionMs < payloadRetentionMs) {
    problems.push(`${where}: dead_letter_retention cannot be shorter than payload_retention`);
  }
  const placement = parsePlacement(options, where, problems);
  const database = databaseBinding(options.database, where, problems);
  const maxBodyBytes = bodyCap(options.max_body_bytes, `${where}.max_body_bytes`, problems);
  const r2Problem = r2BodyThresholdProblem(options.r2_body_threshold);
  if (r2Problem) problems.push(`${where}: ${r2Problem}`);
  const rateProblem = expectedRateProblem(options.expected_rate);
  if (rateProblem) problems.push(`${where}: ${rateProblem}`);
  const segmentsProblem = bodySegmentsProblem(options.body_segments);
  if (segmentsProblem) problems.push(`${where}: ${segmentsProblem}`);
  problems.push(...(context.validateProviderOptions?.(provider, options) ?? []).map((p) => `${where}: ${p}`));
  if (problems.length > 0) return { ok: false, problems };
  return {
    ok: true,
    source: {
      name,
      provider,
      secrets,
      routes,
      destination,
      route,
      maxBodyBytes,
      expectWithinMs: expectWithin < 0 ? null : expectWithin,
      retry,
      payloadRetentionMs,
      dedupeRetentionMs,
      deadLetterRetentionMs,
      placement,
      database,
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
