import * as v from "valibot";
import { parseDuration } from "../lib/duration";
import { likelyMeant } from "../lib/likely-meant";

/**
 * The `[vars.SOURCES.<name>]` table as one valibot schema: each key's type, form, range and problem text, read into
 * typed values (durations in ms, destinations by kind). ./config.ts parses with it and then resolves defaults and
 * the checks that weigh one key against another; scripts/config-schema.mjs turns it into docs/sources.schema.json
 * for editors. A route's filter, schema, transform, headers, flow control and ordering are compiled by their own
 * modules (src/routing, src/gate) and only named here, so each rule still has one home.
 *
 * Messages name the key (relative to the source or route); ./config.ts puts the source and route in front.
 */

export const got = (input: unknown) => `(got ${JSON.stringify(input)})`;

export const DEFAULT_MAX_BODY_BYTES = 1024 * 1024;
/**
 * The largest cap a source may set. D1 and Durable Object SQLite both refuse a row over 2,000,000 bytes, and the
 * body shares its row with the key, hash and kept headers: a larger cap would accept deliveries the claim shard
 * cannot store (503 forever) or the relay cannot move into D1. Local workerd does not enforce that limit, so
 * this check is the only place it is caught before production.
 */
export const MAX_BODY_BYTES_LIMIT = 1_900_000;
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

/** Cloudflare's documented Durable Object location hints. */
export const LOCATION_HINT_WORDS = ["wnam", "enam", "sam", "weur", "eeur", "apac", "oc", "afr", "me"] as const;
export const LOCATION_HINTS: readonly DurableObjectLocationHint[] = LOCATION_HINT_WORDS;
/** The jurisdictions a source may keep its shards in. */
export const JURISDICTION_WORDS = ["eu", "fedramp", "fedramp-high"] as const;
export const JURISDICTIONS: readonly DurableObjectJurisdiction[] = JURISDICTION_WORDS;

export const SOURCE_NAME = /^[a-z0-9][a-z0-9_-]{0,63}$/;
export const ROUTE_NAME = /^[a-z0-9][a-z0-9_-]{0,63}$/;
/** A Worker binding name as wrangler accepts it (a JavaScript identifier). */
export const BINDING_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
/** What lib/duration.ts reads from a string (a bare number is seconds). */
const DURATION_TEXT = /^\s*\d+\s*(?:ms|s|m|h|d)\s*$/;

/** A duration key, read to ms: refused when unreadable or not longer than zero, never silently defaulted. */
export function duration(key: string) {
  const unreadable = (issue: { input: unknown }) =>
    `${key} must be a duration like "90s", "15m", "1h" or "3d" ${got(issue.input)}`;
  return v.pipe(
    v.union(
      [
        v.pipe(v.number(unreadable), v.finite(unreadable), v.minValue(0, unreadable)),
        v.pipe(v.string(unreadable), v.regex(DURATION_TEXT, unreadable)),
      ],
      unreadable,
    ),
    v.metadata({ description: 'A duration: "90s", "15m", "1h", "3d" (or "500ms"), or a number of seconds' }),
    v.transform((value) => parseDuration(value) as number),
    v.gtValue(0, `${key} must be longer than zero`),
  );
}

export const FORWARD_TIMEOUT = v.pipe(
  duration("forward_timeout"),
  v.maxValue(
    MAX_DESTINATION_TIMEOUT_MS,
    `forward_timeout must be at most ${MAX_DESTINATION_TIMEOUT_MS / 60_000}m, to end inside the ${PROCESSING_LEASE_MS / 60_000}-minute processing lease (a longer call would overlap the next consumer's attempt)`,
  ),
);

const SECRET_ENTRY = "each secret is a name or { name, expires }";
/** A Worker secret by name (`wrangler secret put NAME`), refused after `expires`: the end of a rotation's overlap. */
export const SecretSchema = v.union(
  [
    v.pipe(
      v.string(SECRET_ENTRY),
      v.minLength(1, SECRET_ENTRY),
      v.transform((name) => ({ name, expiresAt: null as number | null })),
    ),
    v.pipe(
      v.looseObject({
        name: v.string(),
        expires: v.optional(v.pipe(v.unknown(), v.metadata({ type: "string", description: "An ISO date" }))),
      }),
      v.rawTransform(({ dataset, addIssue, NEVER }) => {
        const { name, expires } = dataset.value;
        if (expires === undefined) return { name, expiresAt: null as number | null };
        const expiresAt = typeof expires === "string" ? Date.parse(expires) : Number.NaN;
        if (!Number.isNaN(expiresAt)) return { name, expiresAt: expiresAt as number | null };
        addIssue({ message: `secret ${name} has an unreadable expires (want an ISO date)` });
        return NEVER;
      }),
    ),
  ],
  SECRET_ENTRY,
);
export type SecretRef = v.InferOutput<typeof SecretSchema>;

export const positive = (key: string) =>
  v.pipe(
    v.number(`${key} must be a positive number`),
    v.finite(`${key} must be a positive number`),
    v.gtValue(0, `${key} must be a positive number`),
  );
const wholeCount = (key: string) => {
  const message = (issue: { input: unknown }) => `${key} must be a whole number, 0 or more ${got(issue.input)}`;
  return v.pipe(v.number(message), v.safeInteger(message), v.minValue(0, message));
};

/** A `retry` table: the keys it sets; a source's is read over DEFAULT_RETRY, a route's over its source's. */
export const RetryTableSchema = v.looseObject(
  {
    base_delay_seconds: v.optional(positive("retry.base_delay_seconds")),
    max_delay_seconds: v.optional(positive("retry.max_delay_seconds")),
    max_retries: v.optional(wholeCount("retry.max_retries")),
    /** ±fraction of each delay, so a burst of failures does not retry in lockstep. */
    jitter: v.optional(
      v.pipe(
        v.number("retry.jitter must be a number from 0 to 1"),
        v.minValue(0, "retry.jitter must be a number from 0 to 1"),
        v.maxValue(1, "retry.jitter must be a number from 0 to 1"),
      ),
    ),
    max_age: v.optional(duration("retry.max_age")),
  },
  "retry must be a table",
);
export type RetryTable = v.InferOutput<typeof RetryTableSchema>;

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

/** Where a route's deliveries go; a forward's timeout is the source's `forward_timeout`, added by ./config.ts. */
export type DestinationTarget =
  | { kind: "handler"; handlerName: string }
  | { kind: "forward"; url: string }
  /** Whoever runs `npm run cli -- listen` on it: a signed forward pushed over a WebSocket (src/listen/). */
  | { kind: "listen"; listenName: string }
  | { kind: "none" };

/** A `listen:<name>` destination's name: it names a ListenHub, and the CLI prints it. */
export const LISTEN_NAME = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

export const DestinationSchema = v.pipe(
  v.string('destination must be "handler:<name>", an https URL, "listen:<name>" or "none"'),
  v.metadata({
    description:
      '"handler:<name>" (a handler registered in code), an https URL to forward to, "listen:<name>" (to whoever runs `npm run cli -- listen`), or "none"',
    anyOf: [
      { const: "none" },
      { pattern: "^handler:." },
      { pattern: "^listen:[A-Za-z0-9][A-Za-z0-9_-]{0,63}$" },
      { pattern: "^[Hh][Tt][Tt][Pp][Ss]?://" },
    ],
  }),
  v.rawTransform(({ dataset, addIssue, NEVER }): DestinationTarget => {
    const value = dataset.value;
    if (value === "none") return { kind: "none" };
    if (value.startsWith("handler:") && value.length > "handler:".length)
      return { kind: "handler", handlerName: value.slice("handler:".length) };
    if (value.startsWith("listen:")) {
      const listenName = value.slice("listen:".length);
      if (LISTEN_NAME.test(listenName)) return { kind: "listen", listenName };
      addIssue({ message: `destination ${JSON.stringify(value)}: a listen name must match ${LISTEN_NAME}` });
      return NEVER;
    }
    const problem = /^https?:\/\//i.test(value)
      ? forwardUrlProblem(value)
      : "is neither handler:<name>, listen:<name> nor a URL";
    if (problem === null) return { kind: "forward", url: value };
    addIssue({ message: `destination ${JSON.stringify(value)} ${problem}` });
    return NEVER;
  }),
);

/** Compiled by src/routing and src/gate (each reports its own problems); described here for editors. */
export const compiledElsewhere = (description: string, jsonSchema: Record<string, unknown> = {}) =>
  v.optional(v.pipe(v.unknown(), v.metadata({ description, ...jsonSchema })));

/** One `[[vars.SOURCES.<name>.routes]]` entry. Any other key is a typo, refused by name. */
export const ROUTE_ENTRIES = {
  name: v.pipe(
    v.string((issue) => `name must match ${ROUTE_NAME} ${got(issue.input)}`),
    v.regex(ROUTE_NAME, (issue) => `name must match ${ROUTE_NAME} ${got(issue.input)}`),
  ),
  destination: DestinationSchema,
  filter: compiledElsewhere("A MongoDB-style query on the event (docs/routing.md)", { type: ["object", "string"] }),
  transform: compiledElsewhere("A JSONata expression that reshapes the event", { type: "string" }),
  schema: compiledElsewhere("A JSON Schema the event must match", { type: ["object", "string"] }),
  headers: compiledElsewhere("Header name = JSONata expression, for a forward", { type: "object" }),
  retry: v.optional(RetryTableSchema),
  rate_limit: compiledElsewhere('"<count>/<s|min|h>"', { type: "string" }),
  max_in_flight: compiledElsewhere("Deliveries of this route in flight at once", { type: "integer" }),
  circuit_breaker: compiledElsewhere("true, or { failures, probe_interval }", { type: ["boolean", "object"] }),
  paused: compiledElsewhere("Hold this route's deliveries", { type: "boolean" }),
  recover: compiledElsewhere(
    '"auto": when the circuit breaker closes again, re-drive the deliveries that died while it was open; "off" (the default)',
    { enum: ["auto", "off"] },
  ),
  ordered_by: compiledElsewhere('"subject" or "body.<path>"', { type: "string" }),
  on_dead: compiledElsewhere('"block" or "skip"', { enum: ["block", "skip"] }),
};
/** A route's own problems with its table: an unknown key (by name), a required one missing, or not a table at all. */
function routeTableProblem(issue: { expected: string | null; input: unknown }): string {
  if (issue.expected === "never") {
    const meant = typeof issue.input === "string" ? likelyMeant(issue.input, Object.keys(ROUTE_ENTRIES)) : null;
    return `unknown route option ${JSON.stringify(issue.input)} (${meant ? `did you mean "${meant}"? ` : ""}a route takes ${Object.keys(ROUTE_ENTRIES).join(", ")})`;
  }
  if (issue.expected === '"name"') return `name must match ${ROUTE_NAME} ${got(undefined)}`;
  if (issue.expected === '"destination"')
    return 'destination is required ("handler:<name>", an https URL, "listen:<name>", or "none")';
  return "routes must be a list of tables ([[vars.SOURCES.<name>.routes]])";
}
export const RouteTableSchema = v.strictObject(ROUTE_ENTRIES, routeTableProblem);
export type RouteTable = v.InferOutput<typeof RouteTableSchema>;
