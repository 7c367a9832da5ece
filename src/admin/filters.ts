import { apiError } from "../lib/errors";
import { parseDuration } from "../sources/config";

/**
 * Query-string parsing shared by the admin API and the dashboard. Anything unreadable is a 400 that names the
 * parameter, never a silently ignored filter: an operator who typed a filter must get what they asked for.
 */

export const RECEIPT_STATUSES = ["pending", "processing", "processed", "stale", "dead", "skipped"] as const;
export const PROVENANCES = ["live", "reconciled", "replayed"] as const;
export type ReceiptStatus = (typeof RECEIPT_STATUSES)[number];
export type ReceiptProvenance = (typeof PROVENANCES)[number];

export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 200;
const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;
const MAX_TEXT = 512;

export interface ReceiptFilter {
  source?: string;
  statuses?: ReceiptStatus[];
  eventType?: string;
  eventKey?: string;
  subjectId?: string;
  provenance?: ReceiptProvenance;
  receivedFrom?: number;
  /** Exclusive, like every time range here: [since, until). */
  receivedUntil?: number;
  /** Keyset cursor: only receipts whose id sorts before this one (ids are ULIDs, so: older). */
  before?: string;
  limit: number;
}

export type Query = Record<string, string | undefined>;

function invalid(parameter: string, expectation: string): never {
  throw apiError(400, "invalid_query", `Query parameter "${parameter}" ${expectation}.`);
}

function text(query: Query, name: string): string | undefined {
  const value = query[name]?.trim();
  if (!value) return undefined;
  if (value.length > MAX_TEXT) invalid(name, `must be at most ${MAX_TEXT} characters`);
  return value;
}

function oneOf<T extends string>(query: Query, name: string, allowed: readonly T[]): T | undefined {
  const value = text(query, name);
  if (value === undefined) return undefined;
  if (!(allowed as readonly string[]).includes(value)) invalid(name, `must be one of ${allowed.join(", ")}`);
  return value as T;
}

/** Epoch milliseconds or an ISO 8601 date. */
export function parseInstant(query: Query, name: string): number | undefined {
  const value = text(query, name);
  if (value === undefined) return undefined;
  const instant = /^\d{1,15}$/.test(value) ? Number(value) : Date.parse(value);
  if (!Number.isFinite(instant)) invalid(name, "must be epoch milliseconds or an ISO 8601 date");
  return instant;
}

export function parseLimit(query: Query): number {
  const value = text(query, "limit");
  if (value === undefined) return DEFAULT_PAGE_SIZE;
  const limit = Number(value);
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE_SIZE) invalid("limit", `must be an integer from 1 to ${MAX_PAGE_SIZE}`);
  return limit;
}

export function parseCursor(query: Query, name = "before"): string | undefined {
  const value = text(query, name);
  if (value !== undefined && !ULID.test(value)) invalid(name, "must be an id from a previous page's nextCursor");
  return value;
}

export function parseReceiptFilter(query: Query): ReceiptFilter {
  const statusText = text(query, "status");
  const statuses = statusText?.split(",").map((status) => status.trim());
  for (const status of statuses ?? []) {
    if (!(RECEIPT_STATUSES as readonly string[]).includes(status)) invalid("status", `must be a comma-separated list of ${RECEIPT_STATUSES.join(", ")}`);
  }
  const filter: ReceiptFilter = {
    source: text(query, "source"),
    statuses: statuses as ReceiptStatus[] | undefined,
    eventType: text(query, "type"),
    eventKey: text(query, "event_key"),
    subjectId: text(query, "subject"),
    provenance: oneOf(query, "provenance", PROVENANCES),
    receivedFrom: parseInstant(query, "since"),
    receivedUntil: parseInstant(query, "until"),
    before: parseCursor(query),
    limit: parseLimit(query),
  };
  if (filter.receivedFrom !== undefined && filter.receivedUntil !== undefined && filter.receivedFrom >= filter.receivedUntil) {
    invalid("since", "must be earlier than until");
  }
  return filter;
}

export const DEFAULT_STATS_WINDOW_MS = 24 * 3_600_000;
const MAX_STATS_WINDOW_MS = 35 * 24 * 3_600_000;

/** "15m", "24h", "7d": how far back the stats look. */
export function parseWindow(query: Query): number {
  const value = text(query, "window");
  if (value === undefined) return DEFAULT_STATS_WINDOW_MS;
  const windowMs = parseDuration(value);
  if (windowMs === null || windowMs <= 0 || windowMs > MAX_STATS_WINDOW_MS) invalid("window", 'must be a duration like "1h" or "7d", at most 35d');
  return windowMs;
}

export function isReceiptId(value: string): boolean {
  return ULID.test(value);
}
