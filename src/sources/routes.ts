import { parseDeliveryControl } from "../gate/control";
import { compileFilter } from "../routing/filter";
import { parseOrdering } from "../routing/ordering";
import type { RouteRules } from "../routing/route";
import { compileSchema } from "../routing/schema";
import { compileHeaders, compileTransform } from "../routing/transform";
import { type DestinationTarget, type RetryTable, ROUTE_NAME, type RouteTable } from "./config-schema";
import type { SourceTable } from "./source-schema";

/**
 * A source's routes: the `destination` it names directly (one route, `default`), or the `[[vars.SOURCES.<name>.routes]]`
 * entries, each with its own name, destination and optional filter, schema, transform and headers. Every event gets
 * one delivery per route that matches it (docs/processing.md, "Deliveries"), retried on the route's own `retry` table
 * when it has one, and held for its turn when the route has `ordered_by` (src/routing/ordering.ts). The route table's
 * keys and their types are in RouteTableSchema (./config-schema.ts); MAX_ROUTES is in ./source-schema.ts.
 */

export const DEFAULT_ROUTE_NAME = "default";
const NO_RULES = { filter: null, schema: null, transform: null, headers: null, control: null, ordering: null };

export interface ParsedRoute<D, R> {
  destination: D;
  rules: RouteRules;
  /** The retry policy of this route's deliveries: its own `retry` table read over the source's. */
  retry: R;
}

/** How problems name the route at `index`: by its name when it has a valid one, else by its place in the list. */
export function routeWhere(where: string, index: number, entry: unknown): string {
  const name = entry && typeof entry === "object" ? (entry as { name?: unknown }).name : undefined;
  return typeof name === "string" && ROUTE_NAME.test(name) ? `${where} route ${name}` : `${where}.routes[${index}]`;
}

/**
 * The source's routes from its table as SourceTableSchema read it (`table`: each route's name, destination and
 * retry, refused values taken out); the route rules are compiled here from the raw table (`options`) by their own
 * modules, and the checks across routes made.
 * @param readDestination the source's own reading of a destination (a forward takes the source's timeout).
 * @param readRetry the same for a route's `retry` table (undefined when the route has none: the source's applies).
 */
export function parseRoutes<D, R>(
  options: Record<string, unknown>,
  table: SourceTable,
  where: string,
  problems: string[],
  readDestination: (target: DestinationTarget | undefined) => D,
  readRetry: (own: RetryTable | undefined) => R,
): ParsedRoute<D, R>[] {
  const fallback = (target: DestinationTarget | undefined) => [
    {
      destination: readDestination(target),
      rules: { name: DEFAULT_ROUTE_NAME, ...NO_RULES },
      retry: readRetry(undefined),
    },
  ];
  if (options.routes === undefined) return fallback(table.destination);
  if (options.destination !== undefined) {
    problems.push(
      `${where}: give the destination in the route, not beside routes (a source's own destination is its one route)`,
    );
  }
  // Absent here when the list itself was refused (not a list, empty, too long): the schema named the problem.
  const list = table.routes as (RouteTable | undefined)[] | undefined;
  const raw = options.routes as Record<string, unknown>[];
  if (!list) return fallback(undefined);
  const parsed = list.flatMap((entry, index) =>
    entry
      ? [parseRoute(raw[index]!, entry, routeWhere(where, index, raw[index]), problems, readDestination, readRetry)]
      : [],
  );
  if (parsed.length === 0) return fallback(undefined);
  // An event carries one ordering value (the relay stores it with the receipt, before any route is chosen), so the
  // ordered routes of one source must agree on what it is; each still keeps its own order and its own on_dead.
  const ordered = parsed.filter(({ rules }) => rules.ordering !== null);
  for (const { rules } of ordered
    .slice(1)
    .filter(({ rules }) => rules.ordering!.text !== ordered[0]!.rules.ordering!.text))
    problems.push(
      `${where} route ${rules.name}: ordered_by ${JSON.stringify(rules.ordering!.text)} differs from route ${ordered[0]!.rules.name}'s ${JSON.stringify(ordered[0]!.rules.ordering!.text)}: the ordered routes of one source order by one value`,
    );
  const names = raw.map((entry) => entry?.name).filter((name): name is string => typeof name === "string");
  for (const name of new Set(names.filter((name, index) => names.indexOf(name) !== index))) {
    problems.push(
      `${where}: route name ${JSON.stringify(name)} is used twice (each route's deliveries are kept under its name)`,
    );
  }
  return parsed;
}

/** One route: its rules compiled from the raw entry, under the route's name in every problem. */
function parseRoute<D, R>(
  raw: Record<string, unknown>,
  entry: RouteTable,
  routeWhere: string,
  problems: string[],
  readDestination: (target: DestinationTarget | undefined) => D,
  readRetry: (own: RetryTable | undefined) => R,
): ParsedRoute<D, R> {
  const rules: RouteRules = { name: entry.name ?? DEFAULT_ROUTE_NAME, ...NO_RULES };
  if (raw.filter !== undefined) {
    const compiled = compileFilter(raw.filter);
    if (compiled.ok) rules.filter = compiled.filter;
    else problems.push(`${routeWhere}: ${compiled.problem}`);
  }
  if (raw.schema !== undefined) {
    const compiled = compileSchema(raw.schema);
    if (compiled.ok) rules.schema = compiled.schema;
    else problems.push(`${routeWhere}: ${compiled.problem}`);
  }
  if (raw.transform !== undefined) {
    const compiled = compileTransform(raw.transform);
    if (compiled.ok) rules.transform = compiled.transform;
    else problems.push(`${routeWhere}: ${compiled.problem}`);
  }
  if (raw.headers !== undefined) {
    const compiled = compileHeaders(raw.headers);
    if (compiled.ok) rules.headers = compiled.headers;
    else problems.push(`${routeWhere}: ${compiled.problem}`);
  }
  rules.control = parseDeliveryControl(raw, routeWhere, problems);
  rules.ordering = parseOrdering(raw, routeWhere, problems);
  return { destination: readDestination(entry.destination), rules, retry: readRetry(entry.retry) };
}
