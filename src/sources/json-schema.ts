import { toJsonSchema } from "@valibot/to-json-schema";
import { DestinationSchema, RetryTableSchema, RouteTableSchema, SecretSchema } from "./config-schema";
import { SourceTableSchema, WranglerSourcesSchema } from "./source-schema";

/**
 * docs/sources.schema.json, as `npm run schema` writes it: the source tables of a wrangler config as a JSON Schema, for
 * an editor to check and complete (docs/local.md, "Checking the source tables in an editor"). Not bundled into the
 * Worker: only the generator (scripts/config-schema.mjs) and test/sources/config-schema.test.ts import it.
 *
 * Input types: what an operator writes ("3d"), not what the parser makes of it (ms). Checks with no JSON Schema form
 * (a refined destination URL, the keys weighed against each other, an adapter's own keys) are the Worker's alone.
 */
export function sourcesJsonSchema(): Record<string, unknown> {
  return {
    title: "wrangler config: the [vars.SOURCES.<name>] tables of the webhook receiver",
    ...toJsonSchema(WranglerSourcesSchema, {
      typeMode: "input",
      errorMode: "ignore",
      definitions: {
        source: SourceTableSchema,
        route: RouteTableSchema,
        retry: RetryTableSchema,
        destination: DestinationSchema,
        secret: SecretSchema,
      },
    }),
  };
}
