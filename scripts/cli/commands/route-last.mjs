// `route test <source> --last N [--config draft.toml] [--route R] [--json]`: the receiver's newest N stored events
// through the source's routes as it runs them now, or as a draft config has them, by the Worker's own route function
// on the receiver (POST /admin/api/sources/<source>/route-test). Sends, enqueues and writes nothing.
import { CliError, EXIT } from "../errors.mjs";
import { adminRequest } from "../http.mjs";
import { lineDiff } from "../line-diff.mjs";
import { configPath } from "../project.mjs";
import { validSource } from "../valid-source.mjs";

/**
 * A draft is the source's table in the config `--config` (or RECEIVER_CONFIG) names, read with wrangler's reader and
 * checked by the Worker's own parser here first; without one, the receiver's running config is tested.
 * @param {string} sourceName
 * @param {{ json?: boolean, route?: string, last?: string } & import("../project.mjs").ProjectOptions} options
 */
export async function routeTestLast(sourceName, options) {
  const last = Number(options.last);
  if (!/^\d+$/.test(String(options.last)) || last < 1)
    throw new CliError(`--last must be a whole number of stored events, such as 200 (got ${options.last})`, EXIT.usage);
  const draftFrom = options.config ?? process.env.RECEIVER_CONFIG;
  const draft = draftFrom === undefined ? undefined : (await validSource(options, sourceName)).table;
  const report = await adminRequest(options, `/sources/${encodeURIComponent(sourceName)}/route-test`, {
    method: "POST",
    body: { last, ...(options.route === undefined ? {} : { route: options.route }), ...(draft ? { draft } : {}) },
  });
  if (options.json) {
    console.log(JSON.stringify(report, null, 2));
    return 0;
  }
  const asWhat = draft ? `routes as in ${configPath(options)}` : "routes as the receiver runs them now";
  console.log(`source ${sourceName} · the newest ${last} stored events · ${asWhat}`);
  const { read, evaluated, bodyPastRetention, bodyFailedIntegrity } = report.receipts;
  console.log(
    `read ${read} · evaluated ${evaluated} · body past retention ${bodyPastRetention} (counted, not evaluated)${bodyFailedIntegrity ? ` · body failed its integrity check ${bodyFailedIntegrity}` : ""}`,
  );
  const now = new Map((report.currentRoutes ?? []).map((/** @type {any} */ tally) => [tally.route, tally]));
  for (const tally of report.routes)
    printTally(tally, report.currentRoutes ? (now.get(tally.route) ?? null) : undefined);
  const names = new Set(report.routes.map((/** @type {any} */ tally) => tally.route));
  for (const [name, tally] of now)
    if (!names.has(name))
      console.log(
        `route ${name}: only in the config now (${tally.match} match, ${tally.skipped} skipped, ${tally.wouldDie} would die)`,
      );
  if (report.changes) printChanges(report.changes);
  console.log("nothing was sent or written");
  return 0;
}

/** @param {any} tally @param {any} [now] now's tally beside a draft's (null: the route is new in the draft) */
function printTally(tally, now) {
  const beside = (/** @type {string} */ field) =>
    now === undefined ? "" : now === null ? "  (new route)" : `  (now ${now[field]})`;
  console.log(`route ${tally.route} → ${tally.destination}`);
  console.log(`  match      ${tally.match}${beside("match")}`);
  console.log(`  skipped    ${tally.skipped}${beside("skipped")}${reasons(tally.skipReasons)}`);
  console.log(`  would die  ${tally.wouldDie}${beside("wouldDie")}${reasons(tally.dieReasons)}`);
}

function reasons(/** @type {Record<string, number>} */ counts) {
  return Object.entries(counts)
    .map(([reason, count]) => `\n             ${count} × ${reason}`)
    .join("");
}

/** @param {{ events: number, listed: any[], leftOut: number }} changes */
function printChanges(changes) {
  console.log(`changed events: ${changes.events}`);
  for (const change of changes.listed) {
    console.log(
      `  ${change.receiptId} ${change.eventKey} · ${change.eventType ?? "(no type)"} · route ${change.route}`,
    );
    for (const line of lineDiff(outcomeLines(change.current), outcomeLines(change.draft))) console.log(`    ${line}`);
  }
  if (changes.leftOut > 0)
    console.log(`  … and ${changes.leftOut} more changed route outcomes (--json lists the same)`);
}

/** An outcome as lines to diff: the transform's output as indented JSON, else one line saying what happens. */
function outcomeLines(/** @type {any} */ outcome) {
  if (outcome === null) return ["(no such route)"];
  if (outcome.kind === "skipped") return [`skipped: ${outcome.reason}`];
  if (outcome.kind === "would_die") return [`would die: ${outcome.error}`];
  const headers = Object.entries(outcome.headers ?? {}).map(([name, value]) => `header ${name}: ${value}`);
  if (outcome.sends === "original") return ["sends the original bytes", ...headers];
  const output =
    outcome.output === undefined
      ? [`(an output of ${outcome.outputBytes} bytes, too long to show)`]
      : JSON.stringify(outcome.output, null, 2).split("\n");
  return [...output, ...headers];
}
