import { apiError } from "../../lib/errors";
import type { DeadReceiptFilter } from "../../replay/replay-receipts";
import { describeUnknown, isReceiptId, parseInstant, type Query, unknownNames } from "../receipts/filters";
import { MAX_REPLAY_IDS } from "./replay-actions";

/**
 * The body of POST /admin/api/dead/replay, read strictly: a bulk replay changes state, so a misspelt key or a
 * missing scope must never fall through to "replay whatever matches nothing-in-particular". Either ids, or a
 * filter that names its scope — a `source`, or `all: true` to mean every source on purpose.
 */
export type BulkReplayRequest =
  | { kind: "ids"; receiptIds: string[] }
  /** `route`: only that route's dead letters of the source (checked against the config by replay.ts). */
  | { kind: "filter"; filter: DeadReceiptFilter; route?: string };

const BY_IDS = ["receiptIds"] as const;
const BY_FILTER = ["source", "all", "route", "type", "since", "until", "limit", "after"] as const;
const ALL_KEYS = [...BY_IDS, ...BY_FILTER];

const USAGE =
  'Send {"receiptIds": [...]} or a filter with its scope: {"source": "...", "route", "since", "until", "type", "limit", "after"} (or "all": true for every source).';

function invalid(message: string): never {
  throw apiError(400, "invalid_body", message);
}

export function parseBulkReplayRequest(body: unknown): BulkReplayRequest {
  if (!body || typeof body !== "object" || Array.isArray(body)) invalid(`The body must be a JSON object. ${USAGE}`);
  const request = body as Record<string, unknown>;
  const unknown = unknownNames(Object.keys(request), ALL_KEYS);
  if (unknown.length > 0) throw apiError(400, "unknown_key", describeUnknown("body key", unknown, ALL_KEYS));

  if (request.receiptIds !== undefined) {
    const mixed = BY_FILTER.filter((name) => request[name] !== undefined);
    if (mixed.length > 0)
      invalid(`receiptIds replays exactly those receipts; it cannot be combined with ${mixed.join(", ")}.`);
    const ids = request.receiptIds;
    if (
      !Array.isArray(ids) ||
      ids.length === 0 ||
      ids.length > MAX_REPLAY_IDS ||
      !ids.every((id) => typeof id === "string" && isReceiptId(id))
    ) {
      invalid(`receiptIds must be 1 to ${MAX_REPLAY_IDS} receipt ids.`);
    }
    return { kind: "ids", receiptIds: [...new Set(ids as string[])] };
  }

  const all = request.all;
  if (all !== undefined && all !== true)
    invalid('"all" may only be true: it says the replay spans every source on purpose.');
  const fields: Query = {};
  const after = request.after;
  if (after !== undefined && (typeof after !== "string" || !isReceiptId(after)))
    invalid('"after" must be the "cursor" a previous bulk replay answered with.');
  for (const name of ["source", "route", "type", "since", "until", "limit"] as const) {
    const value = request[name];
    if (value === undefined) continue;
    if (typeof value !== "string" && typeof value !== "number") invalid(`${name} must be a string or a number.`);
    fields[name] = String(value);
  }
  const source = fields.source?.trim() || undefined;
  if (source === undefined && all !== true)
    invalid(
      `A bulk replay needs its scope: name a "source", or send "all": true to replay every source's dead letters. ${USAGE}`,
    );
  if (source !== undefined && all === true) invalid('Give either "source" or "all": true, not both.');
  const route = fields.route?.trim() || undefined;
  if (fields.route !== undefined && (route === undefined || source === undefined))
    invalid('"route" names a route of the "source" given with it: send both, a route name and its source.');
  return {
    kind: "filter",
    ...(route === undefined ? {} : { route }),
    filter: {
      source,
      eventType: fields.type,
      receivedFrom: parseInstant(fields, "since"),
      receivedBefore: parseInstant(fields, "until"),
      limit: fields.limit === undefined ? undefined : Number(fields.limit),
      after: after as string | undefined,
    },
  };
}
