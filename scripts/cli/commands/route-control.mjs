// `route pause|resume|status <source> <route>`: a route's delivery control through the admin API
// (POST /admin/api/sources/<source>/routes/<route>/pause|resume, GET …/routes/<route>). docs/routing.md
// "Delivery control" says what each does.
import { CliError, EXIT } from "../errors.mjs";
import { adminRequest } from "../http.mjs";

/**
 * @param {"pause" | "resume" | "status"} action
 * @param {string} sourceName
 * @param {string | undefined} routeName
 * @param {{ json?: boolean } & import("../project.mjs").ProjectOptions} options
 */
export async function routeControl(action, sourceName, routeName, options) {
  if (!routeName)
    throw new CliError(`route ${action} needs the route's name: route ${action} <source> <route>`, EXIT.usage);
  const path = `/sources/${encodeURIComponent(sourceName)}/routes/${encodeURIComponent(routeName)}`;
  const view =
    action === "status"
      ? await adminRequest(options, path)
      : await adminRequest(options, `${path}/${action}`, { method: "POST" });
  if (options.json) {
    console.log(JSON.stringify(view));
    return 0;
  }
  const { gate } = view;
  const state = gate.paused || view.pausedInConfig ? `paused${view.pausedInConfig ? " (in config)" : ""}` : "running";
  const said = {
    pause: "paused",
    resume: `resumed: ${view.resumed} held deliver${view.resumed === 1 ? "y" : "ies"} sent on, in received order`,
    status: state,
  }[action];
  console.log(`route ${view.source}/${view.route}: ${said}`);
  console.log(
    `  circuit breaker  ${gate.breakerOpen ? `OPEN since ${new Date(gate.openedAt).toISOString()}` : "closed"} (${gate.failures} failure${gate.failures === 1 ? "" : "s"} in a row)`,
  );
  console.log(`  in flight        ${gate.inFlight}`);
  console.log(`  held by pause    ${gate.held}`);
  return 0;
}
