import { readdirSync, readFileSync } from "node:fs";
import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import type { Json } from "miniflare";
import { defineConfig } from "vitest/config";
import { unstable_readConfig } from "wrangler";
import { startForwardStandin } from "./test/setup/global/forward-standin";
import { FIXTURE_RECONCILE_ORIGIN, startReconcileStandin } from "./test/setup/global/reconcile-stand-in";

/**
 * Test-only configuration is assembled from small files so that each area adds its own without editing this one:
 *   test/fixtures/sources/*.json  — extra sources, added to the ones wrangler.toml declares (the demo source)
 *   test/fixtures/secrets/*.json  — the secrets those sources name
 *   test/setup/global/*.ts        — Node-side global setup (stand-in servers for forwards and provider APIs)
 */
function mergeJsonFiles(directory: string): Record<string, Json> {
  const merged: Record<string, Json> = {};
  for (const file of readdirSync(directory)
    .filter((name) => name.endsWith(".json"))
    .sort()) {
    Object.assign(merged, JSON.parse(readFileSync(`${directory}/${file}`, "utf8")));
  }
  return merged;
}

const deployedSources = unstable_readConfig({ config: "./wrangler.toml" }).vars.SOURCES as Record<string, Json>;

/**
 * The forward stand-in (test/setup/global/forward-standin.ts). The fixture sources name it at 8793; a run that
 * finds 8793 taken (another run on this machine) gets the next free one, then any port the OS picks, and the fixtures
 * are pointed at it here, in the binding itself, so no test file ever rewrites the shared SOURCES object at run time.
 * startForwardStandin serves it from a worker thread that bound the port before it answered, so the port is held
 * from that moment and no other run can take it in between.
 */
const FIXTURE_STANDIN_ORIGIN = "http://127.0.0.1:8793";

/**
 * Every string in the fixtures that names a stand-in at its fixture origin (a source's or a route's destination, a
 * catch-up base URL, a notice channel's or the alert URL), whatever key holds it, pointed at the port this run's
 * stand-in has: the forward stand-in's (above), and the provider-API one's (test/setup/global/reconcile-stand-in.ts,
 * on a port the OS picks).
 */
function repointOrigin<T extends Json>(value: T, fixtureOrigin: string, origin: string): T {
  if (typeof value === "string")
    return (value.startsWith(`${fixtureOrigin}/`) ? origin + value.slice(fixtureOrigin.length) : value) as T;
  if (Array.isArray(value)) return value.map((item) => repointOrigin(item, fixtureOrigin, origin)) as T;
  if (value && typeof value === "object")
    return Object.fromEntries(
      Object.entries(value).map(([key, item]) => [key, repointOrigin(item, fixtureOrigin, origin)]),
    ) as T;
  return value;
}

/**
 * Two vitest projects. Starting a workerd for a test file costs about six seconds before its first test
 * (docs/testing.md, "Where the time goes"), so most files share one (`shared`, `isolate: false`): one D1, one set of
 * Durable Objects and queues, one module graph, for every file in SHARED_WORKERD. Each of those files keys its
 * receipts, sources and accounts uniquely and waits only for its own work, so what an earlier file left behind is
 * never what it reads. The rest get a workerd each (`isolated`): files that run the cron (whose steps over the whole
 * store act on what other files left) or the stats over every source, drive outages and restarts, or count what the
 * whole store holds; and the files listed in OWN_WORKERD, which read something another file can set in the isolate.
 */
const SHARED_WORKERD = [
  "test/admin/",
  "test/bodies/",
  "test/capacity/",
  "test/claims/",
  "test/consumers/",
  "test/databases/",
  "test/edges/",
  "test/ingest/",
  "test/monitor/",
  "test/pipeline/",
  "test/providers/",
  "test/replay/",
  "test/routing/",
  "test/sources/",
  // The reconciler's files run the cron (over every source, or over sources other files use); these do not.
  "test/reconcile/lease-return.test.ts",
  "test/reconcile/partition-shard-keys.test.ts",
  "test/reconcile/retention-scan.test.ts",
  "test/reconcile/route-gates-plan.test.ts",
];
const OWN_WORKERD = new Set([
  // State of the isolate or the store that another file sets too.
  "test/admin/access-role-forms.test.ts", // the key fetcher caches a team's signing keys per isolate
  "test/admin/config-problems.test.ts", // the parsed source tables, cached per environment object
  "test/admin/token-guard.test.ts", // the sign-in throttle counts failures per address
  "test/monitor/issue-channel-failure.test.ts", // a notice channel's backlog, which every issue notice joins
  "test/admin/metrics.test.ts", // the Analytics Engine tally of answered deliveries
  // The isolate's meter (src/lib/meter.ts) read around work of its own: other files' queue and alarm work adds to it.
  "test/admin/route-test.test.ts",
  "test/bodies/segments.test.ts",
  "test/consumers/relay-grant.test.ts",
  "test/consumers/slices.test.ts",
  "test/databases/admin-lists.test.ts",
  "test/databases/partition-arbiter.test.ts",
  "test/routing/control.test.ts",
  "test/routing/control-fan-out.test.ts",
  "test/routing/fan-out.test.ts",
  "test/monitor/signature-issues.test.ts", // the isolate's tally of refused signatures, which other files add to
  "test/claims/shard-epoch.test.ts", // its cron hands over the keys of every source
  // The cron: whatever SOURCES it is given, its steps over the whole store (the ring's partitions, the run history,
  // issues) act on what other files left, and they on its work.
  "test/admin/audit-log.test.ts",
  "test/databases/cron-across.test.ts",
  "test/databases/move.test.ts",
  "test/databases/partition-keep.test.ts", // it readies the ring's databases three days on, archiving them
  "test/monitor/destination-failing.test.ts",
  "test/pipeline/local-faults.test.ts",
  "test/replay/route-recovery.test.ts",
  "test/routing/delivery-guarantees.test.ts",
  // A source's totals (stats, percentiles, what retention deletes) from a source other files write to too.
  "test/admin/partitioned-stats.test.ts",
  "test/replay/replay-figures.test.ts",
  "test/replay/replay-log.test.ts",
  // Work they leave running (a thousand events behind a dead one, an outage's backlog) slows the files after them;
  // and files that slowed most behind such work (crash windows, ordering: 4 s became 50).
  "test/consumers/dead-letters.test.ts",
  "test/claims/outage-recovery.test.ts",
  "test/monitor/issues.test.ts",
  "test/pipeline/crash-windows.test.ts",
  "test/pipeline/ordering-and-noops.test.ts",
  // Files that wait for or read every claim shard or the whole store (settle, expectUnchanged, meterTotals in
  // test/support/): correct when shared, but each read then visits every other file's shards, 3 s files took 40 s
  // (and 90 s in a fresh-clone run, the other suites beside it).
  "test/admin/openmetrics-endpoint.test.ts", // the stats of every source, and the D1 reads they cost
  "test/admin/verification-health.test.ts",
  "test/claims/claims.test.ts",
  "test/claims/relay-timing.test.ts",
  "test/claims/relay.test.ts",
  "test/claims/tombstones.test.ts",
  "test/ingest/ack-path.test.ts",
  "test/ingest/body-read.test.ts",
  "test/ingest/signature-work.test.ts",
  "test/pipeline/retry-storm.test.ts",
  "test/claims/quarantine-cap.test.ts",
  "test/claims/unsigned-keys-senders.test.ts",
  "test/claims/unsigned-keys.test.ts",
  "test/databases/admin-by-id.test.ts",
  "test/ingest/sources.test.ts",
  "test/ingest/verification.test.ts",
  "test/pipeline/budget.test.ts",
  "test/pipeline/lifetime-budget.test.ts",
]);
const testFiles = ["test", "src"].flatMap((folder) =>
  readdirSync(folder, { recursive: true, encoding: "utf8" })
    .filter((name) => name.endsWith(".test.ts"))
    .map((name) => `${folder}/${name}`)
    .sort(),
);
const sharesWorkerd = (file: string) =>
  SHARED_WORKERD.some((prefix) => file.startsWith(prefix)) && !OWN_WORKERD.has(file);
// A renamed or removed file must not leave its entry behind: a renamed OWN_WORKERD file would share unnoticed.
const unmatched = [
  ...[...OWN_WORKERD].filter((file) => !testFiles.includes(file)),
  ...SHARED_WORKERD.filter((prefix) => !testFiles.some((file) => file.startsWith(prefix))),
];
if (unmatched.length > 0)
  throw new Error(`vitest.config.ts names test files that do not exist: ${unmatched.join(", ")}`);

const globalSetup = readdirSync("./test/setup/global")
  .filter((name) => name.endsWith(".ts"))
  .sort()
  .map((name) => `./test/setup/global/${name}`);

export default defineConfig(async () => {
  const forwardOrigin = `http://127.0.0.1:${await startForwardStandin()}`;
  const reconcileOrigin = `http://127.0.0.1:${await startReconcileStandin()}`;
  const pointed = <T extends Json>(fixtures: T) =>
    repointOrigin(
      repointOrigin(fixtures, FIXTURE_STANDIN_ORIGIN, forwardOrigin),
      FIXTURE_RECONCILE_ORIGIN,
      reconcileOrigin,
    );
  const sources = pointed({ ...deployedSources, ...mergeJsonFiles("./test/fixtures/sources") });
  return {
    plugins: [
      cloudflareTest({
        wrangler: { configPath: "./wrangler.toml" },
        miniflare: {
          // A second receipt database, so splitting sources across databases is tested end to end
          // (test/fixtures/sources/databases.json puts sources there; docs/operations.md "Past one database").
          // And a ring of four for the receipt partitions (test/fixtures/sources/partitions.json, docs/operating.md
          // "Receipts in time partitions"): one database a day, so a receipt stays two days in D1 (keep 2d); the
          // `partitioned-keys` source keeps its keys ten days in the claim shards, past the drop.
          d1Databases: {
            DB_SECOND: "receiver-second-database",
            DB_P0: "receiver-partition-0",
            DB_P1: "receiver-partition-1",
            DB_P2: "receiver-partition-2",
            DB_P3: "receiver-partition-3",
          },
          bindings: {
            RECEIPT_PARTITIONS: {
              databases: ["DB_P0", "DB_P1", "DB_P2", "DB_P3"],
              period: "1d",
              spread: 1,
              keep: "2d",
            },
            TEST_MIGRATIONS: await readD1Migrations("./migrations"),
            SOURCES: sources,
            // Tests wait on the pipeline, so the shards relay after a quarter second instead of the default 3 s;
            // batching itself is tested by filling batches, not by waiting out the delay.
            RELAY_DELAY_MS: "250",
            ...pointed(mergeJsonFiles("./test/fixtures/secrets")),
            // Where test/reconcile/support.ts reaches the provider-API stand-in (STAND_IN).
            RECONCILE_STAND_IN: reconcileOrigin,
          },
        },
      }),
    ],
    test: {
      projects: [
        { extends: true, test: { name: "isolated", include: testFiles.filter((file) => !sharesWorkerd(file)) } },
        { extends: true, test: { name: "shared", include: testFiles.filter(sharesWorkerd), isolate: false } },
      ],
      setupFiles: ["./test/setup/apply-migrations.ts"],
      globalSetup,
      // VITEST_MAX_WORKERS=2 runs two test files at a time, each in its own workerd with its own D1, Durable Objects
      // and queues. The forward and key stand-ins answer from threads of their own, so a busy main loop no longer
      // delays them, and a test reads a stand-in lane for its own receipts only (test/routing/gate-support.ts, lane).
      // Not the default (vitest's default on 2 cores is one file at a time): measured on 2 cores it saves 10 to 25 %,
      // not half, since two workerds and this process's transforms share the CPU; and routing/control.test.ts's
      // rate_limit test then sees a 3/s route's sends bunch at the destination (4 or 6 in a second) when a send leaves
      // later than the gate's guard allows (seen before issue 37's pacing changes; docs/testing.md).
      ...(process.env.VITEST_MAX_WORKERS ? { maxWorkers: Number(process.env.VITEST_MAX_WORKERS) } : {}),
      // Longer than a pipeline wait (PIPELINE_WAIT_MS, test/support/deliveries.ts), so a wait that runs out fails
      // naming what it waited for, not with a bare test timeout.
      testTimeout: 90_000,
      // The receiver logs one JSON line per delivery and attempt; show them only for a test that fails.
      silent: "passed-only" as const,
    },
  };
});
