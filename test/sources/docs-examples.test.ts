import { env } from "cloudflare:workers";
import { describe, expect, inject, it } from "vitest";
import { accessSettings } from "../../src/admin/access/access-settings";
import { handlerNames } from "../../src/handlers/registry";
import { adapterFor, knownProviderNames } from "../../src/providers/registry";
import { parseSourceTables } from "../../src/sources/config";
import { partitionProblems } from "../../src/sources/partitions";

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

/** A block's vars, top-level or under [env.production] (deploy.md's examples are production's). */
function varsOf(config: Record<string, unknown>): {
  SOURCES?: unknown;
  RECEIPT_PARTITIONS?: unknown;
  ACCESS_ROLES?: unknown;
} {
  const production = (config.env as Record<string, { vars?: Record<string, unknown> }> | undefined)?.production;
  const top = config.vars as Record<string, unknown> | undefined;
  return { ...production?.vars, ...top };
}

describe("the other operator docs' source examples (docs/local.md, deploy.md, reconciler.md, operating.md), pasted as they say", () => {
  const docs = inject("operatorDocsToml");

  it("each declares sources, top-level or under [env.production], that parse with no problems", () => {
    expect(Object.keys(docs)).toHaveLength(4);
    for (const [doc, blocks] of Object.entries(docs)) {
      expect(blocks.length, `${doc} has toml examples`).toBeGreaterThan(0);
      for (const { block, firstLine, config } of blocks) {
        // The Access sign-in example declares roles, not sources: checked below.
        if (varsOf(config).ACCESS_ROLES !== undefined && varsOf(config).SOURCES === undefined) continue;
        const sources = varsOf(config).SOURCES;
        expect(sources, `${doc} block ${block} (${firstLine}) declares no source table`).toBeTypeOf("object");
        const { problems, sources: valid } = parseSourceTables(sources, context);
        expect(Object.fromEntries(problems), `${doc} block ${block} (${firstLine})`).toEqual({});
        expect(valid.size, `${doc} block ${block} (${firstLine})`).toBeGreaterThan(0);
      }
    }
  });
});

describe("the docs' receipt-partition rings ([vars.RECEIPT_PARTITIONS]), on a Worker that binds the databases they name", () => {
  const docs = inject("operatorDocsToml");
  const rings = Object.entries(docs).flatMap(([doc, blocks]) =>
    blocks.flatMap((block) => {
      const vars = varsOf(block.config);
      return vars.RECEIPT_PARTITIONS === undefined ? [] : [{ doc, ...block, vars }];
    }),
  );

  it("finds the ring examples of deploy.md and operating.md", () => {
    // A guard on the extraction: a renamed table or a broken fence would otherwise pass vacuously.
    expect(rings.map(({ doc }) => doc).sort()).toEqual(["docs/deploy.md", "docs/operating.md", "docs/operating.md"]);
  });

  it("each ring and its partitioned sources are accepted as configured (keep, period, spread, retention)", () => {
    for (const { doc, block, firstLine, vars } of rings) {
      const ring = vars.RECEIPT_PARTITIONS as { databases?: unknown };
      // deploy.md elides the d1_databases entries past the first ("one entry per database"): the Worker is
      // taken to bind every database the ring names, each a real local D1 binding.
      const bound = Object.fromEntries(
        (Array.isArray(ring.databases) ? ring.databases : []).map((name) => [String(name), env.DB_P0]),
      );
      const { sources } = parseSourceTables(vars.SOURCES, context);
      expect(sources.size, `${doc} block ${block} (${firstLine})`).toBeGreaterThan(0);
      const problems = partitionProblems({ ...bound, RECEIPT_PARTITIONS: vars.RECEIPT_PARTITIONS }, [
        ...sources.values(),
      ]);
      expect(Object.fromEntries(problems), `${doc} block ${block} (${firstLine})`).toEqual({});
    }
  });
});

describe("docs/operating.md's Cloudflare Access example ([vars] ACCESS_TEAM_DOMAIN, ACCESS_AUD, ACCESS_ROLES)", () => {
  it("turns Access sign-in on, with every entry accepted", () => {
    const examples = Object.values(inject("operatorDocsToml"))
      .flat()
      .map(({ config }) => varsOf(config))
      .filter((vars) => vars.ACCESS_ROLES !== undefined);
    expect(examples).toHaveLength(1);
    expect(accessSettings(examples[0]!)).toMatchObject({
      kind: "on",
      teamOrigin: "https://your-team.cloudflareaccess.com",
    });
  });
});
