import { apiError } from "../../lib/errors";
import type { ReplayJobFilter } from "../../replay/replay-filter";
import { describeUnknown, parseInstant, type Query, unknownNames } from "../receipts/filters";

/**
 * A bulk replay job's request (POST /admin/api/replays, the CLI's `replay --source`, the dashboard's form), read
 * strictly: a misspelt key must never widen what is replayed. The filter's words are the CLI's: `type`, `since` and
 * `until` (ISO 8601 or epoch ms), `error`; replay-filter.ts checks the rest.
 */
export interface ReplayJobRequest {
  filter: ReplayJobFilter;
  dryRun: boolean;
  jobKey?: string;
}

const REQUEST_KEYS = ["filter", "dryRun", "jobKey"] as const;
export const JOB_FILTER_KEYS = ["source", "route", "status", "type", "since", "until", "error"] as const;

const USAGE =
  'Send {"filter": {"source": "...", "route", "status": "dead|skipped|processed", "type", "since", "until", "error"}, "dryRun": true|false, "jobKey"}.';

function invalid(message: string): never {
  throw apiError(400, "invalid_body", message);
}

export function parseReplayJobRequest(body: unknown): ReplayJobRequest {
  if (!body || typeof body !== "object" || Array.isArray(body)) invalid(`The body must be a JSON object. ${USAGE}`);
  const request = body as Record<string, unknown>;
  const unknown = unknownNames(Object.keys(request), REQUEST_KEYS);
  if (unknown.length > 0) throw apiError(400, "unknown_key", describeUnknown("body key", unknown, REQUEST_KEYS));
  if (request.dryRun !== undefined && typeof request.dryRun !== "boolean") invalid('"dryRun" must be true or false.');
  if (request.jobKey !== undefined && typeof request.jobKey !== "string") invalid('"jobKey" must be a string.');
  const given = request.filter;
  if (!given || typeof given !== "object" || Array.isArray(given)) invalid(`"filter" must be an object. ${USAGE}`);
  return {
    filter: parseJobFilter(given as Record<string, unknown>),
    dryRun: request.dryRun === true,
    ...(request.jobKey === undefined ? {} : { jobKey: request.jobKey as string }),
  };
}

/** The filter's words, from a JSON object or a form: the job's filter, its times in epoch ms. */
export function parseJobFilter(given: Record<string, unknown>): ReplayJobFilter {
  const unknown = unknownNames(Object.keys(given), JOB_FILTER_KEYS);
  if (unknown.length > 0) throw apiError(400, "unknown_key", describeUnknown("filter key", unknown, JOB_FILTER_KEYS));
  const fields: Query = {};
  for (const name of JOB_FILTER_KEYS) {
    const value = given[name];
    if (value === undefined || value === "") continue;
    if (typeof value !== "string" && typeof value !== "number") invalid(`filter.${name} must be a string or a number.`);
    fields[name] = String(value);
  }
  if (fields.source === undefined) invalid(`A replay job needs its "source". ${USAGE}`);
  return {
    source: fields.source,
    status: (fields.status ?? "dead") as ReplayJobFilter["status"],
    ...(fields.route === undefined ? {} : { route: fields.route }),
    ...(fields.type === undefined ? {} : { eventType: fields.type }),
    ...(fields.error === undefined ? {} : { error: fields.error }),
    ...optionalInstant("since", parseInstant(fields, "since")),
    ...optionalInstant("until", parseInstant(fields, "until")),
  };
}

function optionalInstant(name: "since" | "until", value: number | undefined): Partial<ReplayJobFilter> {
  return value === undefined ? {} : { [name]: value };
}
