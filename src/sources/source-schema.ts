import * as v from "valibot";
import { likelyMeant } from "../lib/likely-meant";
import { PROVIDER_OPTIONS } from "../providers/option-keys";
import {
  BINDING_NAME,
  compiledElsewhere,
  DestinationSchema,
  duration,
  FORWARD_TIMEOUT,
  got,
  JURISDICTION_WORDS,
  LOCATION_HINT_WORDS,
  MAX_BODY_BYTES_LIMIT,
  positive,
  RetryTableSchema,
  ROUTE_ENTRIES,
  RouteTableSchema,
  SecretSchema,
  SOURCE_NAME,
} from "./config-schema";

/**
 * One `[vars.SOURCES.<name>]` table (the keys ./config-schema.ts describes, put together), and the wrangler config
 * around it for docs/sources.schema.json. A provider adapter reads its own keys from the same table and checks
 * them itself (validateOptions in src/providers); they are named here from src/providers/option-keys.ts, so that
 * any other key is refused as the typo it is (unknownKeyProblems).
 */

/** Routes one source may list: each matched one costs its events up to two D1 rows. */
export const MAX_ROUTES = 16;

const SECRETS = "secrets must name at least one Worker secret";
const ROUTES = "routes must be a list of tables ([[vars.SOURCES.<name>.routes]])";
const oneOf = <T extends readonly string[]>(key: string, allowed: T) =>
  v.picklist(allowed, (issue) => `${key} must be one of ${allowed.join(", ")} ${got(issue.input)}`);
const BYTES = `max_body_bytes must be a whole number of bytes up to ${MAX_BODY_BYTES_LIMIT}`;
const R2_THRESHOLD = "r2_body_threshold must be a whole number of bytes";
const RATE = (issue: { input: unknown }) =>
  `expected_rate must be a number of events a second above 0, such as 25 or 0.5 ${got(issue.input)}`;
const DATABASE = (issue: { input: unknown }) =>
  `database must name a D1 binding of this Worker, such as "DB_EU" ${got(issue.input)}`;

/** An adapter's key: its value is the adapter's to check (validateOptions), described here for editors. */
const providerOption = (description: string) => v.optional(v.pipe(v.unknown(), v.metadata({ description })));
const PROVIDER_ENTRIES = Object.fromEntries(
  Object.entries(PROVIDER_OPTIONS).map(([key, description]) => [key, providerOption(description)]),
) as { [Key in keyof typeof PROVIDER_OPTIONS]: ReturnType<typeof providerOption> };

const SOURCE_ENTRIES = {
  provider: v.pipe(v.string(), v.metadata({ description: "The adapter that verifies deliveries (docs/providers.md)" })),
  secrets: v.pipe(v.array(SecretSchema, SECRETS), v.minLength(1, SECRETS)),
  destination: v.optional(DestinationSchema),
  forward_timeout: v.optional(FORWARD_TIMEOUT),
  routes: v.optional(
    v.pipe(
      v.array(RouteTableSchema, ROUTES),
      v.minLength(1, "routes is empty; name one route, or drop routes and give destination"),
      v.maxLength(MAX_ROUTES, (issue) => {
        const count = Array.isArray(issue.input) ? issue.input.length : 0;
        return `routes lists ${count} routes; a source takes at most ${MAX_ROUTES}`;
      }),
    ),
  ),
  retry: v.optional(RetryTableSchema),
  expect_within: v.optional(duration("expect_within")),
  alert_pending_after: v.optional(duration("alert_pending_after")),
  dedupe_retention: v.optional(duration("dedupe_retention")),
  payload_retention: v.optional(duration("payload_retention")),
  dead_letter_retention: v.optional(duration("dead_letter_retention")),
  location_hint: v.optional(oneOf("location_hint", LOCATION_HINT_WORDS)),
  jurisdiction: v.optional(oneOf("jurisdiction", JURISDICTION_WORDS)),
  database: v.optional(v.pipe(v.string(DATABASE), v.regex(BINDING_NAME, DATABASE))),
  max_body_bytes: v.optional(
    v.pipe(positive("max_body_bytes"), v.integer(BYTES), v.maxValue(MAX_BODY_BYTES_LIMIT, BYTES)),
  ),
  r2_body_threshold: v.optional(v.pipe(v.number(R2_THRESHOLD), v.integer(R2_THRESHOLD), v.minValue(0, R2_THRESHOLD))),
  body_segments: v.optional(v.boolean("body_segments must be true or false")),
  expected_rate: v.optional(v.pipe(v.number(RATE), v.finite(RATE), v.gtValue(0, RATE))),
  catch_up: compiledElsewhere("The reconciler's catch-up (docs/reconciler.md)", { type: "object" }),
  ...PROVIDER_ENTRIES,
};
/** Every key a source table may hold: its own and its adapter's. */
export const SOURCE_KEYS: readonly string[] = Object.keys(SOURCE_ENTRIES);

/**
 * Loose in the Worker so every unknown key is named at once (unknownKeyProblems; a strict object stops at the
 * first); closed in the JSON Schema, so an editor flags the same keys.
 */
export const SourceTableSchema = v.pipe(
  v.looseObject(
    SOURCE_ENTRIES,
    // Its one required key besides provider (checked first, against the adapters this build has) is secrets.
    (issue) => (issue.expected === '"secrets"' ? SECRETS : "must be a table"),
  ),
  v.metadata({ additionalProperties: false }),
);
export type SourceTable = v.InferOutput<typeof SourceTableSchema>;

/** Keys of a route that are not a source's: set on the source, they are in the wrong table, not misspelt. */
const ROUTE_ONLY_KEYS = Object.keys(ROUTE_ENTRIES).filter((key) => key !== "name" && !SOURCE_KEYS.includes(key));

/**
 * One problem per key of a source's table that neither the source nor any adapter reads: a typo'd key would
 * otherwise be ignored (a misspelt `destination` leaves every event with nowhere to go). Names the key it was
 * probably meant to be.
 */
export function unknownKeyProblems(table: Readonly<Record<string, unknown>>): string[] {
  return Object.keys(table)
    .filter((key) => !SOURCE_KEYS.includes(key))
    .map((key) => {
      if (ROUTE_ONLY_KEYS.includes(key))
        return `${key} belongs to a route: put it in a [[vars.SOURCES.<name>.routes]] entry with the destination`;
      const meant = likelyMeant(key, SOURCE_KEYS);
      return `unknown option ${JSON.stringify(key)}${meant ? ` (did you mean "${meant}"?)` : " (neither a source key nor any provider's option: docs/providers.md lists them)"}`;
    });
}

/** `SOURCES` itself: source name → its table. */
export const SourcesSchema = v.record(v.pipe(v.string(), v.regex(SOURCE_NAME)), SourceTableSchema);

/**
 * What an editor checks a whole wrangler config against: the SOURCES table, top-level or under any `[env.<name>]`.
 * Only those tables are described; the rest of the file is wrangler's own (its config-schema.json).
 */
const VarsWithSources = v.looseObject({ vars: v.optional(v.looseObject({ SOURCES: v.optional(SourcesSchema) })) });
export const WranglerSourcesSchema = v.looseObject({
  ...VarsWithSources.entries,
  env: v.optional(v.record(v.string(), VarsWithSources)),
});
