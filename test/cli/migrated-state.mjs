// Local D1 state with every migration applied, made once and copied for each `wrangler dev` a test starts.
// `wrangler d1 migrations apply --local` starts a fresh workerd for each migration file (two dozen of them): about a
// minute of CPU on a quiet machine and several on a loaded one, paid again by every test file that starts a
// receiver. The migrations are still applied by wrangler itself, exactly as `npm start` applies them, but once per
// set of migrations: the state is kept under node_modules/.cache keyed by wrangler's version, the Worker's
// wrangler.toml and every migration file's name and text, and a change to any of them makes a new one.
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";

const ROOT = resolve(import.meta.dirname, "../..");
const CACHE_DIR = join(ROOT, "node_modules", ".cache", "receiver-test-d1");
const WRANGLER = join(ROOT, "node_modules", ".bin", "wrangler");
/** Kept states: a few branches' migrations side by side; the oldest go first. */
const KEPT_STATES = 4;

/** The migrations_dir of wrangler.toml's first D1 binding (DB), as the project writes it. */
function migrationsDir(/** @type {string} */ workerRoot, /** @type {string} */ configText) {
  const dir = /^\s*migrations_dir\s*=\s*"([^"]+)"/m.exec(configText)?.[1] ?? "migrations";
  return resolve(workerRoot, dir);
}

function stateKey(/** @type {string} */ workerRoot) {
  const configText = readFileSync(join(workerRoot, "wrangler.toml"), "utf8");
  const hash = createHash("sha256")
    .update(createRequire(import.meta.url)("wrangler/package.json").version)
    .update("\0")
    .update(configText);
  const dir = migrationsDir(workerRoot, configText);
  // wrangler applies the .sql files at the top of migrations_dir, in name order.
  for (const name of readdirSync(dir)
    .filter((file) => file.endsWith(".sql"))
    .sort())
    hash.update(`\0${name}\0`).update(readFileSync(join(dir, name)));
  return hash.digest("hex").slice(0, 32);
}

/**
 * Fills `persistTo` (a directory that does not exist yet) with the local state of a freshly migrated DB, the D1
 * binding of the Worker in `workerRoot`. Test configs built from that wrangler.toml bind the same database id, so
 * `wrangler dev --persist-to persistTo` finds it migrated.
 * @param {string} workerRoot
 * @param {string} persistTo
 * @param {NodeJS.ProcessEnv} env
 */
export function copyMigratedState(workerRoot, persistTo, env) {
  const kept = join(CACHE_DIR, stateKey(workerRoot));
  if (!isDirectory(kept)) {
    mkdirSync(CACHE_DIR, { recursive: true });
    // Built aside and renamed into place: two test processes starting at once each build one, the first rename wins.
    const building = mkdtempSync(join(CACHE_DIR, "building-"));
    try {
      execFileSync(
        WRANGLER,
        [
          "d1",
          "migrations",
          "apply",
          "DB",
          "--local",
          "--config",
          join(workerRoot, "wrangler.toml"),
          "--persist-to",
          building,
        ],
        { cwd: workerRoot, env: { ...env, CI: "true", WRANGLER_SEND_METRICS: "false" }, stdio: "pipe" },
      );
      renameSync(building, kept);
    } catch (error) {
      rmSync(building, { recursive: true, force: true });
      if (!isDirectory(kept)) throw error;
    }
    pruneOldStates(kept);
  }
  cpSync(kept, persistTo, { recursive: true });
}

function isDirectory(/** @type {string} */ path) {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

function pruneOldStates(/** @type {string} */ current) {
  const hourAgo = Date.now() - 3_600_000;
  for (const name of readdirSync(CACHE_DIR)) {
    // Left by a test process killed while it built one.
    if (name.startsWith("building-") && statSync(join(CACHE_DIR, name)).mtimeMs < hourAgo)
      rmSync(join(CACHE_DIR, name), { recursive: true, force: true });
  }
  const states = readdirSync(CACHE_DIR)
    .filter((name) => !name.startsWith("building-"))
    .map((name) => join(CACHE_DIR, name))
    .filter((path) => path !== current)
    .sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs);
  for (const stale of states.slice(KEPT_STATES - 1)) rmSync(stale, { recursive: true, force: true });
}
