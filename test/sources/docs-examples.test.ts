import { describe, expect, inject, it } from "vitest";
import { handlerNames } from "../../src/handlers/registry";
import { adapterFor, knownProviderNames } from "../../src/providers/registry";
import { parseSourceTables } from "../../src/sources/config";

/** Every ```toml block of docs/providers.md, read by wrangler's config reader (test/setup/global/docs-toml.ts). */
type DocTomlBlock = { block: number; firstLine: string; config: Record<string, unknown> };
declare module "vitest" {
  export interface ProvidedContext {
    providersDocToml: DocTomlBlock[];
    operatorDocsToml: Record<string, DocTomlBlock[]>;
  }
}

const context = {
  knownProviders: knownProviderNames(),
  knownHandlers: handlerNames(),
  validateProviderOptions: (provider: string, options: Record<string, unknown>) =>
    adapterFor(provider)?.validateOptions?.(options) ?? [],
};

describe("docs/providers.md examples, pasted into wrangler.toml", () => {
  const blocks = inject("providersDocToml");

  it("has an example for every provider the docs name", () => {
    // A guard on the extraction itself: a doc edit that broke the fences would otherwise pass vacuously.
    expect(blocks.length).toBeGreaterThanOrEqual(17);
  });

  it("each parses through the receiver's config parser with no problems", () => {
    for (const { block, firstLine, config } of blocks) {
      const sources = (config.vars as { SOURCES?: unknown } | undefined)?.SOURCES;
      expect(sources, `block ${block} (${firstLine}) declares no [vars.SOURCES.<name>] table`).toBeTypeOf("object");
      const { problems, sources: valid } = parseSourceTables(sources, context);
      expect(Object.fromEntries(problems), `block ${block} (${firstLine})`).toEqual({});
      expect(valid.size, `block ${block} (${firstLine})`).toBeGreaterThan(0);
    }
  });
});

describe("the other operator docs' source examples (docs/local.md, deploy.md, reconciler.md), pasted as they say", () => {
  const docs = inject("operatorDocsToml");

  it("each declares sources, top-level or under [env.production], that parse with no problems", () => {
    expect(Object.keys(docs)).toHaveLength(3);
    for (const [doc, blocks] of Object.entries(docs)) {
      expect(blocks.length, `${doc} has toml examples`).toBeGreaterThan(0);
      for (const { block, firstLine, config } of blocks) {
        const production = (config.env as Record<string, { vars?: { SOURCES?: unknown } }> | undefined)?.production;
        const sources = (config.vars as { SOURCES?: unknown } | undefined)?.SOURCES ?? production?.vars?.SOURCES;
        expect(sources, `${doc} block ${block} (${firstLine}) declares no source table`).toBeTypeOf("object");
        const { problems, sources: valid } = parseSourceTables(sources, context);
        expect(Object.fromEntries(problems), `${doc} block ${block} (${firstLine})`).toEqual({});
        expect(valid.size, `${doc} block ${block} (${firstLine})`).toBeGreaterThan(0);
      }
    }
  });
});
