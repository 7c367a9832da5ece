/**
 * What test/setup/global/docs-toml.ts provides (it runs on the Node side, outside this tsconfig): the toml examples
 * of the docs and the shipped wrangler.toml, as wrangler's config reader reads them.
 */
export type DocTomlBlock = { block: number; firstLine: string; config: Record<string, unknown> };

declare module "vitest" {
  export interface ProvidedContext {
    providersDocToml: DocTomlBlock[];
    operatorDocsToml: Record<string, DocTomlBlock[]>;
    wranglerToml: Record<string, unknown>;
  }
}
