// `dismiss <receipt-id...> [--route R]` and `restore <receipt-id...> [--route R]`: take dead letters out of the dead
// letters (a dismissed one is kept, shown, and never replayed by a bulk replay), or put dismissed ones back
// (POST /admin/api/dead/dismiss|restore; docs/operating.md "Dead letters"). With --route, that route's delivery of
// each receipt moves, and a dismissed delivery no longer holds its ordered route (docs/routing.md).
import { CliError, EXIT } from "../errors.mjs";
import { adminRequest } from "../http.mjs";

/** The admin API's cap on ids per call (its MAX_DISMISS_IDS): more go in several calls. */
const IDS_PER_CALL = 100;

const WORDS = {
  dismiss: { done: "dismissed", from: "dead" },
  restore: { done: "restored", from: "dismissed" },
};

/**
 * @param {"dismiss" | "restore"} action
 * @param {string[]} receiptIds
 * @param {{ route?: string, json?: boolean } & import("../project.mjs").ProjectOptions} options
 */
export async function moveDeadLetters(action, receiptIds, options) {
  if (receiptIds.length === 0)
    throw new CliError(`say which receipts: ${action} <receipt-id...> [--route <route>]`, EXIT.usage);
  /** @type {string[]} */
  const changed = [];
  /** @type {string[]} */
  const unchanged = [];
  /** @type {string[]} */
  const routeNotFound = [];
  /** @type {CliError | null} */
  let firstRouteRefusal = null;
  for (let start = 0; start < receiptIds.length; start += IDS_PER_CALL) {
    const body = { receiptIds: receiptIds.slice(start, start + IDS_PER_CALL), route: options.route };
    /** @type {import("../../../src/admin/actions/dismiss").DismissReport} */
    let report;
    try {
      report = await adminRequest(options, `/dead/${action}`, { method: "POST", body });
    } catch (error) {
      // With --route, the API refuses a call whole (404) when none of its receipts' sources has the route. One call
      // of several: those ids are this command's `routeNotFound`, and the other calls' moves still get reported.
      if (!(options.route !== undefined && error instanceof CliError && error.exitCode === EXIT.notFound)) throw error;
      firstRouteRefusal ??= error;
      routeNotFound.push(...body.receiptIds);
      continue;
    }
    changed.push(...report.changed);
    unchanged.push(...report.unchanged);
    routeNotFound.push(...(report.routeNotFound ?? []));
  }
  // Refused for every id: the API's own answer (no source has the route, or none of these receipts' sources has it).
  if (firstRouteRefusal !== null && changed.length + unchanged.length === 0) throw firstRouteRefusal;
  if (options.json) {
    console.log(
      JSON.stringify(options.route === undefined ? { changed, unchanged } : { changed, unchanged, routeNotFound }),
    );
  } else {
    const { done, from } = WORDS[action];
    const what = options.route === undefined ? "" : ` (route ${options.route})`;
    console.log(`${done} ${changed.length} of ${receiptIds.length}${what}`);
    for (const id of changed) console.log(`  ${id}`);
    if (unchanged.length > 0) {
      console.log(`not ${done}, not ${from}${options.route === undefined ? "" : " on that route"} (or unknown):`);
      for (const id of unchanged) console.log(`  ${id}`);
    }
    if (routeNotFound.length > 0) {
      console.log(`not ${done}, their source has no route ${options.route}:`);
      for (const id of routeNotFound) console.log(`  ${id}`);
    }
  }
  // Some asked for were not moved: the command did not do all it was asked, which a script should see.
  return unchanged.length + routeNotFound.length === 0 ? 0 : EXIT.failed;
}

/**
 * @param {string[]} receiptIds
 * @param {{ route?: string, json?: boolean } & import("../project.mjs").ProjectOptions} options
 */
export const dismiss = (receiptIds, options) => moveDeadLetters("dismiss", receiptIds, options);

/**
 * @param {string[]} receiptIds
 * @param {{ route?: string, json?: boolean } & import("../project.mjs").ProjectOptions} options
 */
export const restore = (receiptIds, options) => moveDeadLetters("restore", receiptIds, options);
