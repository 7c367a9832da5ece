import { secretValue } from "../lib/secrets";
import type { SourceOptions, SourceSecret } from "../providers/types";

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
}

export type Destination =
  | { kind: "handler"; handlerName: string }
  | { kind: "forward"; url: string; timeoutMs: number }
  | { kind: "none" };

export interface SourceConfig {
  name: string;
  provider: string;
  secrets: readonly SecretRef[];
  destination: Destination;
  maxBodyBytes: number;
  /** Silence alert threshold in ms, when the source is expected to be busy. */
  expectWithinMs: number | null;
  retry: RetryPolicy;
  payloadRetentionMs: number;
  dedupeRetentionMs: number;
  options: SourceOptions;
}

export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;
/**
 * The largest cap a source may set. D1 and Durable Object SQLite both refuse a row over 2,000,000 bytes, and the
 * body shares its row with the key, hash and kept headers: a larger cap would accept deliveries the claim shard
 * cannot store (503 forever) or the relay cannot move into D1. Local workerd does not enforce that limit, so
 * this check is the only place it is caught before production.
 */
export const MAX_BODY_BYTES_LIMIT = 1_900_000;
export const DEFAULT_RETRY: RetryPolicy = { baseDelaySeconds: 30, maxDelaySeconds: 86_400, maxRetries: 12, jitter: 0.2 };
const DAY_MS = 86_400_000;
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

const SOURCE_NAME = /^[a-z0-9][a-z0-9_-]{0,63}$/;

/** "90s", "15m", "1h", "7d" → milliseconds. */
export function parseDuration(value: unknown): number | null {
  if (typeof value === "number" && Number.isFinite(value) && value >= 0) return value * 1000;
  if (typeof value !== "string") return null;
  const match = /^(\d+)\s*(ms|s|m|h|d)$/.exec(value.trim());
  if (!match) return null;
  const unitMs = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: DAY_MS }[match[2] as "ms" | "s" | "m" | "h" | "d"];
  return Number(match[1]) * unitMs;
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

function parseDestination(value: unknown, where: string, options: SourceOptions, problems: string[]): Destination {
  if (value === undefined || value === "none") return { kind: "none" };
  if (typeof value !== "string") {
    problems.push(`${where}: destination must be "handler:<name>", an https URL or "none"`);
    return { kind: "none" };
  }
  if (value.startsWith("handler:") && value.length > "handler:".length) {
    return { kind: "handler", handlerName: value.slice("handler:".length) };
  }
  if (/^https?:\/\//.test(value)) {
    const timeoutMs = parseDuration(options.forward_timeout) ?? DEFAULT_FORWARD_TIMEOUT_MS;
    return { kind: "forward", url: value, timeoutMs };
  }
  problems.push(`${where}: destination ${JSON.stringify(value)} is neither handler:<name> nor a URL`);
  return { kind: "none" };
}

function positiveNumber(value: unknown, fallback: number, where: string, problems: string[]): number {
  if (value === undefined) return fallback;
  if (typeof value === "number" && Number.isFinite(value) && value > 0) return value;
  problems.push(`${where} must be a positive number`);
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

export interface ParseContext {
  /** Provider names an adapter exists for; anything else fails validation instead of accepting traffic. */
  knownProviders: ReadonlySet<string>;
  /** Handler names registered in code. */
  knownHandlers: ReadonlySet<string>;
  validateProviderOptions?: (provider: string, options: SourceOptions) => string[];
}

export function parseSources(raw: unknown, context: ParseContext): Map<string, SourceConfig> {
  const problems: string[] = [];
  const sources = new Map<string, SourceConfig>();
  if (!raw || typeof raw !== "object" || Array.isArray(raw)) {
    throw new SourceConfigError(["SOURCES must be a table of sources"]);
  }
  for (const [name, value] of Object.entries(raw as Record<string, unknown>)) {
    const where = `SOURCES.${name}`;
    if (!SOURCE_NAME.test(name)) problems.push(`${where}: name must match ${SOURCE_NAME}`);
    if (!value || typeof value !== "object") {
      problems.push(`${where}: must be a table`);
      continue;
    }
    const options = value as SourceOptions;
    const provider = options.provider;
    if (typeof provider !== "string" || !context.knownProviders.has(provider)) {
      problems.push(`${where}: unsupported provider ${JSON.stringify(provider)}`);
      continue;
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
    const destination = parseDestination(options.destination, where, options, problems);
    if (destination.kind === "handler" && !context.knownHandlers.has(destination.handlerName)) {
      problems.push(`${where}: no handler named ${JSON.stringify(destination.handlerName)} is registered`);
    }
    const retryTable = (options.retry ?? {}) as Record<string, unknown>;
    const retry: RetryPolicy = {
      baseDelaySeconds: positiveNumber(retryTable.base_delay_seconds, DEFAULT_RETRY.baseDelaySeconds, `${where}.retry.base_delay_seconds`, problems),
      maxDelaySeconds: positiveNumber(retryTable.max_delay_seconds, DEFAULT_RETRY.maxDelaySeconds, `${where}.retry.max_delay_seconds`, problems),
      maxRetries: positiveNumber(retryTable.max_retries, DEFAULT_RETRY.maxRetries, `${where}.retry.max_retries`, problems),
      jitter: fraction(retryTable.jitter, DEFAULT_RETRY.jitter, `${where}.retry.jitter`, problems),
    };
    if (options.expect_within !== undefined && parseDuration(options.expect_within) === null) {
      problems.push(`${where}: expect_within must be a duration like "1h"`);
    }
    const dedupeRetentionMs = parseDuration(options.dedupe_retention) ?? DEFAULT_DEDUPE_RETENTION_MS;
    const payloadRetentionMs = parseDuration(options.payload_retention) ?? DEFAULT_PAYLOAD_RETENTION_MS;
    if (payloadRetentionMs > dedupeRetentionMs) {
      problems.push(`${where}: payload_retention cannot outlast dedupe_retention`);
    }
    problems.push(...(context.validateProviderOptions?.(provider, options) ?? []).map((p) => `${where}: ${p}`));
    sources.set(name, {
      name,
      provider,
      secrets,
      destination,
      maxBodyBytes: bodyCap(options.max_body_bytes, `${where}.max_body_bytes`, problems),
      expectWithinMs: parseDuration(options.expect_within),
      retry,
      payloadRetentionMs,
      dedupeRetentionMs,
      options,
    });
  }
  if (problems.length > 0) throw new SourceConfigError(problems);
  return sources;
}

/**
 * The secrets a delivery may be verified with right now. A name listed in config but absent from the Worker's
 * secrets is a deploy mistake, reported as such (the caller answers 503 so the sender retries).
 */
export function usableSecrets(
  source: SourceConfig,
  env: object,
  now: number,
): { secrets: SourceSecret[]; missing: string[] } {
  const secrets: SourceSecret[] = [];
  const missing: string[] = [];
  for (const ref of source.secrets) {
    const value = secretValue(env, ref.name);
    if (value === null) {
      missing.push(ref.name);
      continue;
    }
    if (ref.expiresAt !== null && now >= ref.expiresAt) continue;
    secrets.push({ name: ref.name, value });
  }
  return { secrets, missing };
}
