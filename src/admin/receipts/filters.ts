import { apiError } from "../../lib/errors";
import { likelyMeant } from "../../lib/likely-meant";
import { parseDuration } from "../../sources/config";
import { isReceiptCursor } from "./receipt-cursor";

/**
 * Query-string parsing shared by the admin API and the dashboard. Anything unreadable is a 400 that names the
 * parameter, never a silently ignored filter: an operator who typed a filter must get what they asked for.
 * Names are camelCase, like the JSON the API answers with and the bulk replay body (`eventKey`, `receiptIds`).
 */

export const RECEIPT_STATUSES = [
  "pending",
  "processing",
  "processed",
  "stale",
  "dead",
  "skipped",
  "dismissed",
] as const;
export const PROVENANCES = ["live", "reconciled", "replayed"] as const;
export type ReceiptStatus = (typeof RECEIPT_STATUSES)[number];
export type ReceiptProvenance = (typeof PROVENANCES)[number];

export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 200;
const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;
const MAX_TEXT = 512;
const MAX_CURSOR = 8192;

export interface ReceiptFilter {
  source?: string;
  statuses?: ReceiptStatus[];
  eventType?: string;
  eventKey?: string;
  subjectId?: string;
  /** An item id inside a batched delivery (SendGrid `sg_event_id`, Adyen `pspReference`): src/providers/batch-items.ts. */
  itemId?: string;
  provenance?: ReceiptProvenance;
  receivedFrom?: number;
  /** Exclusive, like every time range here: [since, until). */
  receivedUntil?: number;
  /** Keyset cursor (receipt-cursor.ts): receipts whose id sorts before its id (ids are ULIDs, so: older). */
  before?: string;
  /** Keyset cursor the other way: only receipts newer than this one (the previous page). */
  after?: string;
  limit: number;
}

export type Query = Record<string, string | undefined>;

/** What GET /receipts (and /dead, without status) filters on. */
export const RECEIPT_FILTER_PARAMETERS = [
  "source",
  "status",
  "type",
  "eventKey",
  "subject",
  "itemId",
  "provenance",
  "since",
  "until",
  "before",
  "after",
  "limit",
] as const;

/** The names in `given` that are not in `allowed`, in the order given. */
export function unknownNames(given: Iterable<string>, allowed: readonly string[]): string[] {
  return [...given].filter((name) => !allowed.includes(name));
}

/**
 * "Unknown query parameter "sttus" (did you mean "status"?); accepted: …". Names the caller's own keys back to
 * them, which the admin API may do: it answers only to the admin token. Each name is cut short and quoted as JSON.
 */
export function describeUnknown(kind: string, unknown: readonly string[], allowed: readonly string[]): string {
  const named = unknown.slice(0, 5).map((name) => {
    const meant = likelyMeant(name, allowed);
    return `${JSON.stringify(name.slice(0, 64))}${meant ? ` (did you mean "${meant}"?)` : ""}`;
  });
  const more = unknown.length > 5 ? ` and ${unknown.length - 5} more` : "";
  // A route may accept two lists that share names (/receipts: the filters and the changes parameters).
  const accepted = allowed.length > 0 ? `accepted: ${[...new Set(allowed)].join(", ")}` : "none are accepted here";
  return `Unknown ${kind}${unknown.length === 1 ? "" : "s"} ${named.join(", ")}${more}; ${accepted}.`;
}

/** A typo'd filter must not widen the answer to "everything": any parameter this route does not read is a 400. */
export function rejectUnknownParameters(query: Query, allowed: readonly string[]): void {
  const unknown = unknownNames(Object.keys(query), allowed);
  if (unknown.length > 0)
    throw apiError(400, "unknown_parameter", describeUnknown("query parameter", unknown, allowed));
}

function invalid(parameter: string, expectation: string): never {
  throw apiError(400, "invalid_query", `Query parameter "${parameter}" ${expectation}.`);
}

function text(query: Query, name: string, maxLength = MAX_TEXT): string | undefined {
  const value = query[name]?.trim();
  if (!value) return undefined;
  if (value.length > maxLength) invalid(name, `must be at most ${maxLength} characters`);
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
  if (!Number.isInteger(limit) || limit < 1 || limit > MAX_PAGE_SIZE)
    invalid("limit", `must be an integer from 1 to ${MAX_PAGE_SIZE}`);
  return limit;
}

/** A quarantine page's cursor: a quarantine id, or a page's `nextCursor` (the id and each database's read time). */
export function parseCursor(query: Query, name = "before"): string | undefined {
  const value = text(query, name, MAX_CURSOR);
  if (value !== undefined && !isReceiptCursor(value))
    invalid(name, `must be an id from a previous page's ${name === "after" ? "prevCursor" : "nextCursor"}`);
  return value;
}

/**
 * A receipt page's cursor: a receipt id, or the `nextCursor`/`prevCursor` of a page (the id and each database's
 * read time, so it grows with the number of receipt databases: at most about 130 characters each).
 */
function parseReceiptCursor(query: Query, name: "before" | "after"): string | undefined {
  const value = text(query, name, MAX_CURSOR);
  if (value !== undefined && !isReceiptCursor(value))
    invalid(name, `must be a previous page's ${name === "after" ? "prevCursor" : "nextCursor"} or a receipt id`);
  return value;
}

export function parseReceiptFilter(query: Query): ReceiptFilter {
  const statusText = text(query, "status");
  const statuses = statusText?.split(",").map((status) => status.trim());
  for (const status of statuses ?? []) {
    if (!(RECEIPT_STATUSES as readonly string[]).includes(status))
      invalid("status", `must be a comma-separated list of ${RECEIPT_STATUSES.join(", ")}`);
  }
  const filter: ReceiptFilter = {
    source: text(query, "source"),
    statuses: statuses as ReceiptStatus[] | undefined,
    eventType: text(query, "type"),
    eventKey: text(query, "eventKey"),
    subjectId: text(query, "subject"),
    itemId: text(query, "itemId"),
    provenance: oneOf(query, "provenance", PROVENANCES),
    receivedFrom: parseInstant(query, "since"),
    receivedUntil: parseInstant(query, "until"),
    before: parseReceiptCursor(query, "before"),
    after: parseReceiptCursor(query, "after"),
    limit: parseLimit(query),
  };
  if (
    filter.receivedFrom !== undefined &&
    filter.receivedUntil !== undefined &&
    filter.receivedFrom >= filter.receivedUntil
  ) {
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
  if (windowMs === null || windowMs <= 0 || windowMs > MAX_STATS_WINDOW_MS)
    invalid("window", 'must be a duration like "1h" or "7d", at most 35d');
  return windowMs;
}

export function isReceiptId(value: string): boolean {
  return ULID.test(value);
}
