import { apiError } from "../../lib/errors";
import { parseSource, type SourceConfig } from "../../sources/config";
import { sourceParseContext } from "../../sources/registry";
import { describeUnknown } from "../receipts/filters";

/**
 * The body of POST /admin/api/sources/:source/route-test: {"last": n, "route"?: name, "draft"?: the source's table
 * as `[vars.SOURCES.<source>]` would hold it}. A draft is checked by the Worker's own source parser, the one a deploy
 * would meet, and refused with every problem it has.
 */

/** How many stored events one call may run through the routes: the bound on its work, with each event's steps (MAX_ROUTE_STEPS). */
export const MAX_ROUTE_TEST_EVENTS = 1000;

const KEYS = ["last", "route", "draft"];

export interface RouteTestRequest {
  last: number;
  /** Only this route (of the config now, the draft, or both); null: every route. */
  route: string | null;
  draft: SourceConfig | null;
}

export function parseRouteTestRequest(source: string, body: unknown): RouteTestRequest {
  const usage = `Send a JSON object {"last": 1 to ${MAX_ROUTE_TEST_EVENTS}, "route"?: "<name>", "draft"?: {the source's table}}.`;
  if (!body || typeof body !== "object" || Array.isArray(body)) throw apiError(400, "invalid_body", usage);
  const unknown = Object.keys(body).filter((key) => !KEYS.includes(key));
  if (unknown.length > 0) throw apiError(400, "unknown_key", describeUnknown("key", unknown, KEYS));
  const { last, route, draft } = body as { last?: unknown; route?: unknown; draft?: unknown };
  if (typeof last !== "number" || !Number.isInteger(last) || last < 1 || last > MAX_ROUTE_TEST_EVENTS)
    throw apiError(
      400,
      "invalid_body",
      `"last" must be a whole number from 1 to ${MAX_ROUTE_TEST_EVENTS} (the most stored events one test runs through the routes). ${usage}`,
    );
  if (route !== undefined && (typeof route !== "string" || route.length === 0))
    throw apiError(400, "invalid_body", `"route" must be a route's name. ${usage}`);
  return { last, route: route ?? null, draft: draft === undefined ? null : parseDraft(source, draft) };
}

function parseDraft(source: string, draft: unknown): SourceConfig {
  const parsed = parseSource(source, draft, sourceParseContext());
  if (!parsed.ok) throw apiError(400, "invalid_draft", `The draft config is not valid: ${parsed.problems.join("; ")}`);
  return parsed.source;
}
