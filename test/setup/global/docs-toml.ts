import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestProject } from "vitest/node";
import { experimental_readRawConfig } from "wrangler";

/**
 * The ```toml blocks of docs/providers.md (and of the OPERATOR_DOCS below), read by wrangler's own config reader (the one `wrangler deploy` uses),
 * so a test can run each pasted example through the receiver's real source parser. Workerd has no TOML reader;
 * this runs on the Node side and hands the parsed tables to the tests.
 */

export interface DocTomlBlock {
  /** 1-based position among the file's toml blocks, for failure messages. */
  block: number;
  /** The block's first line, to find it in the doc. */
  firstLine: string;
  config: Record<string, unknown>;
}

declare module "vitest" {
  export interface ProvidedContext {
    providersDocToml: DocTomlBlock[];
    /** The other operator docs whose examples declare sources: file name → its toml blocks. */
    operatorDocsToml: Record<string, DocTomlBlock[]>;
    /** The shipped wrangler.toml, as wrangler reads it (test/sources/config-schema.test.ts checks its sources). */
    wranglerToml: Record<string, unknown>;
  }
}

/** Docs besides providers.md whose ```toml blocks are sources to paste (routing.md's are run by test/cli/route.test.mjs). */
export const OPERATOR_DOCS = ["docs/local.md", "docs/deploy.md", "docs/reconciler.md", "docs/operating.md"] as const;

export function tomlBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/^```toml\n([\s\S]*?)^```$/gm)].map((match) => match[1]!);
}

export default function setup(project: TestProject): void {
  const directory = mkdtempSync(join(tmpdir(), "providers-doc-toml-"));
  const read = (doc: string) =>
    tomlBlocks(readFileSync(doc, "utf8")).map((text, index): DocTomlBlock => {
      const path = join(directory, `${doc.replace(/\W/g, "-")}-block-${index + 1}.toml`);
      writeFileSync(path, text);
      const { rawConfig } = experimental_readRawConfig({ config: path });
      return { block: index + 1, firstLine: text.split("\n")[0]!, config: rawConfig as Record<string, unknown> };
    });
  try {
    project.provide("providersDocToml", read("docs/providers.md"));
    project.provide("operatorDocsToml", Object.fromEntries(OPERATOR_DOCS.map((doc) => [doc, read(doc)])));
    project.provide(
      "wranglerToml",
      experimental_readRawConfig({ config: "wrangler.toml" }).rawConfig as Record<string, unknown>,
    );
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
}
