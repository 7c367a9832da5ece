// Wrangler's config reader, remembered: importing wrangler costs about 2 CPU-seconds (a 15 MB bundle), more than
// the rest of a `send` together, and the answer depends only on the file's text, where it lies, the environment
// asked for and wrangler's version. So each read is kept under node_modules/.cache keyed by exactly those, and a
// config read once is not read by wrangler again until one of them changes. A read that failed or printed anything
// is never kept: the next command reads it again and says the same.
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";

const CACHE_DIR = join(import.meta.dirname, "..", "..", "node_modules", ".cache", "receiver-cli-config");
/** Enough for every config a person or a test run switches between; the oldest go first. */
const KEPT_ENTRIES = 200;

/**
 * The config as `read` (wrangler's own reader) answers it, from the cache when this exact read was kept.
 * @template T
 * @param {{ path: string, env?: string }} request
 * @param {() => Promise<(args: { config: string, env?: string }) => T>} loadReader imports wrangler, only on a miss
 * @returns {Promise<T>}
 */
export async function cachedConfigRead(request, loadReader) {
  const key = cacheKey(request);
  const entry = key && join(CACHE_DIR, `${key}.json`);
  if (entry) {
    try {
      return JSON.parse(readFileSync(entry, "utf8"));
    } catch {
      // Not kept yet (or unreadable): read it below.
    }
  }
  const read = await loadReader();
  // Wrangler prints what it has to say of a config (unexpected fields, a redirect, …) through the console while
  // it reads: a read that printed anything is not kept, so the next command prints it again.
  let printed = false;
  const methods = /** @type {const} */ (["log", "info", "warn", "error"]);
  const originals = methods.map((method) => console[method]);
  methods.forEach((method, index) => {
    console[method] = (/** @type {unknown[]} */ ...args) => {
      printed = true;
      originals[index].apply(console, args);
    };
  });
  let config;
  try {
    config = read({ config: request.path, env: request.env });
  } finally {
    methods.forEach((method, index) => {
      console[method] = originals[index];
    });
  }
  if (!entry || printed) return config;
  // What a later command reads back from the cache, so the first command sees exactly the same.
  const kept = JSON.parse(JSON.stringify(config));
  keep(entry, kept);
  return kept;
}

/** @param {{ path: string, env?: string }} request */
function cacheKey(request) {
  try {
    const text = readFileSync(request.path);
    const wrangler = createRequire(import.meta.url)("wrangler/package.json").version;
    return createHash("sha256")
      .update(
        // The path as given and where from, beside the file it names: wrangler keeps the given one in its answer.
        JSON.stringify({
          wrangler,
          path: request.path,
          cwd: process.cwd(),
          file: resolve(request.path),
          env: request.env ?? null,
        }),
      )
      .update(text)
      .digest("hex");
  } catch {
    return undefined;
  }
}

/** Written whole or not at all (a rename), so a command running beside this one never reads half an entry. */
function keep(/** @type {string} */ entry, /** @type {unknown} */ config) {
  try {
    mkdirSync(CACHE_DIR, { recursive: true });
    const partial = `${entry}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
    writeFileSync(partial, JSON.stringify(config));
    renameSync(partial, entry);
    prune();
  } catch {
    // A read-only checkout still works: every command reads the config with wrangler, as without the cache.
  }
}

function prune() {
  const entries = readdirSync(CACHE_DIR).filter((name) => name.endsWith(".json"));
  if (entries.length <= KEPT_ENTRIES) return;
  const byAge = entries
    .map((name) => ({ name, modified: statSync(join(CACHE_DIR, name), { throwIfNoEntry: false })?.mtimeMs ?? 0 }))
    .sort((a, b) => a.modified - b.modified);
  for (const { name } of byAge.slice(0, entries.length - KEPT_ENTRIES)) rmSync(join(CACHE_DIR, name), { force: true });
}
