import { CONTROL_KEYS, parseDeliveryControl } from "../gate/control";
import { compileFilter } from "../routing/filter";
import { ORDERING_KEYS, parseOrdering } from "../routing/ordering";
import type { RouteRules } from "../routing/route";
import { compileSchema } from "../routing/schema";
import { compileHeaders, compileTransform } from "../routing/transform";

/**
 * A source's routes: the `destination` it names directly (one route, `default`), or the `[[vars.SOURCES.<name>.routes]]`
 * entries, each with its own name, destination and optional filter, schema, transform and headers. Every event gets
 * one delivery per route that matches it (docs/processing.md, "Deliveries"), retried on the route's own `retry` table
 * when it has one, and held for its turn when the route has `ordered_by` (src/routing/ordering.ts).
 */

const ROUTE_NAME = /^[a-z0-9][a-z0-9_-]{0,63}$/;
export const DEFAULT_ROUTE_NAME = "default";
const ROUTE_KEYS = new Set([
  "name",
  "destination",
  "filter",
  "transform",
  "schema",
  "headers",
  "retry",
  ...CONTROL_KEYS,
  ...ORDERING_KEYS,
]);
/** Routes one source may list: each matched one costs its events up to two D1 rows. */
export const MAX_ROUTES = 16;
const ROUTE_ONLY_KEYS = ["filter", "transform", "schema", ...CONTROL_KEYS, ...ORDERING_KEYS] as const;
const NO_RULES = { filter: null, schema: null, transform: null, headers: null, control: null, ordering: null };

export interface ParsedRoute<D, R> {
  destination: D;
  rules: RouteRules;
  /** The retry policy of this route's deliveries: its own `retry` table read over the source's. */
  retry: R;
}

/**
 * @param readDestination the source's own destination parser, so a route's destination is read exactly as a
 * source's is (handler:<name>, a URL, or none) and reports its problems under the route's name.
 * @param readRetry the same for a route's `retry` table (undefined when the route has none: the source's applies).
 */
export function parseRoutes<D, R>(
  options: Record<string, unknown>,
  where: string,
  problems: string[],
  readDestination: (value: unknown, where: string) => D,
  readRetry: (value: unknown, where: string) => R,
): ParsedRoute<D, R>[] {
  for (const key of ROUTE_ONLY_KEYS) {
    if (options[key] !== undefined)
      problems.push(
        `${where}: ${key} belongs to a route: put it in a [[vars.SOURCES.<name>.routes]] entry with the destination`,
      );
  }
  const list = options.routes;
  if (list === undefined) {
    return [
      {
        destination: readDestination(options.destination, where),
        rules: { name: DEFAULT_ROUTE_NAME, ...NO_RULES },
        retry: readRetry(undefined, where),
      },
    ];
  }
  const fallback = () => [
    {
      destination: readDestination(undefined, where),
      rules: { name: DEFAULT_ROUTE_NAME, ...NO_RULES },
      retry: readRetry(undefined, where),
    },
  ];
  if (!Array.isArray(list) || list.some((entry) => !entry || typeof entry !== "object" || Array.isArray(entry))) {
    problems.push(`${where}: routes must be a list of tables ([[vars.SOURCES.<name>.routes]])`);
    return fallback();
  }
  if (options.destination !== undefined) {
    problems.push(
      `${where}: give the destination in the route, not beside routes (a source's own destination is its one route)`,
    );
  }
  if (list.length === 0) {
    problems.push(`${where}: routes is empty; name one route, or drop routes and give destination`);
    return fallback();
  }
  if (list.length > MAX_ROUTES) {
    problems.push(`${where}: routes lists ${list.length} routes; a source takes at most ${MAX_ROUTES}`);
    return fallback();
  }
  const parsed = list.map((entry, index) =>
    parseRoute(entry as Record<string, unknown>, `${where}.routes[${index}]`, problems, readDestination, readRetry),
  );
  // An event carries one ordering value (the relay stores it with the receipt, before any route is chosen), so the
  // ordered routes of one source must agree on what it is; each still keeps its own order and its own on_dead.
  const ordered = parsed.filter(({ rules }) => rules.ordering !== null);
  for (const { rules } of ordered
    .slice(1)
    .filter(({ rules }) => rules.ordering!.text !== ordered[0]!.rules.ordering!.text))
    problems.push(
      `${where} route ${rules.name}: ordered_by ${JSON.stringify(rules.ordering!.text)} differs from route ${ordered[0]!.rules.name}'s ${JSON.stringify(ordered[0]!.rules.ordering!.text)}: the ordered routes of one source order by one value`,
    );
  const names = list
    .map((entry) => (entry as Record<string, unknown>).name)
    .filter((name): name is string => typeof name === "string");
  for (const name of new Set(names.filter((name, index) => names.indexOf(name) !== index))) {
    problems.push(
      `${where}: route name ${JSON.stringify(name)} is used twice (each route's deliveries are kept under its name)`,
    );
  }
  return parsed;
}

function parseRoute<D, R>(
  table: Record<string, unknown>,
  where: string,
  problems: string[],
  readDestination: (value: unknown, where: string) => D,
  readRetry: (value: unknown, where: string) => R,
): ParsedRoute<D, R> {
  for (const key of Object.keys(table)) {
    if (!ROUTE_KEYS.has(key))
      problems.push(
        `${where}: unknown route option ${JSON.stringify(key)} (a route takes ${[...ROUTE_KEYS].join(", ")})`,
      );
  }
  const name = table.name;
  if (typeof name !== "string" || !ROUTE_NAME.test(name))
    problems.push(`${where}: name must match ${ROUTE_NAME} (got ${JSON.stringify(name)})`);
  const routeWhere =
    typeof name === "string" && ROUTE_NAME.test(name)
      ? `${where.replace(/\.routes\[\d+\]$/, "")} route ${name}`
      : where;
  if (table.destination === undefined)
    problems.push(`${routeWhere}: destination is required ("handler:<name>", an https URL, or "none")`);
  const destination = readDestination(table.destination, routeWhere);
  const rules: RouteRules = { name: typeof name === "string" ? name : DEFAULT_ROUTE_NAME, ...NO_RULES };
  if (table.filter !== undefined) {
    const compiled = compileFilter(table.filter);
    if (compiled.ok) rules.filter = compiled.filter;
    else problems.push(`${routeWhere}: ${compiled.problem}`);
  }
  if (table.schema !== undefined) {
    const compiled = compileSchema(table.schema);
    if (compiled.ok) rules.schema = compiled.schema;
    else problems.push(`${routeWhere}: ${compiled.problem}`);
  }
  if (table.transform !== undefined) {
    const compiled = compileTransform(table.transform);
    if (compiled.ok) rules.transform = compiled.transform;
    else problems.push(`${routeWhere}: ${compiled.problem}`);
  }
  if (table.headers !== undefined) {
    const compiled = compileHeaders(table.headers);
    if (compiled.ok) rules.headers = compiled.headers;
    else problems.push(`${routeWhere}: ${compiled.problem}`);
  }
  rules.control = parseDeliveryControl(table, routeWhere, problems);
  rules.ordering = parseOrdering(table, routeWhere, problems);
  return { destination, rules, retry: readRetry(table.retry, routeWhere) };
}
