import type { RouteControlView } from "../../actions/route-control";
import type { Role } from "../../guards/actor";
import { RoleGate } from "../role-gate";

/**
 * Each route of a source with delivery control, on its source page (one panel per route, ids prefixed by its name): paused or running, the circuit breaker, and the
 * Pause / Resume button (posting to /admin/sources/<source>/routes/<route>/pause|resume, CSRF-checked by Origin).
 */
export function RouteControlPanel(props: { view: RouteControlView; role: Role }) {
  const { view } = props;
  const { gate } = view;
  const paused = gate.paused || view.pausedInConfig;
  const action = `/admin/sources/${encodeURIComponent(view.source)}/routes/${encodeURIComponent(view.route)}`;
  return (
    <div class="route-control" id={`route-${view.route}`}>
      <h2>Route {view.route}</h2>
      <p>
        {paused ? (
          <strong id={`route-${view.route}-paused`}>
            Paused{view.pausedInConfig ? " in config (deploy paused = false to resume)" : ""}
          </strong>
        ) : (
          <span id={`route-${view.route}-running`}>Running</span>
        )}
        {" · "}
        {gate.breakerOpen ? (
          <strong class="bad" id={`route-${view.route}-breaker-open`}>
            Circuit breaker open since {new Date(gate.openedAt!).toISOString()} ({gate.failures} failures in a row)
          </strong>
        ) : (
          <span>Circuit breaker closed</span>
        )}
        {" · "}
        {gate.inFlight} in flight · {gate.held} held by the pause
      </p>
      {!view.pausedInConfig && (
        <RoleGate role={props.role} needs="operator" doing={gate.paused ? "resume this route" : "pause this route"}>
          <form method="post" action={`${action}/${gate.paused ? "resume" : "pause"}`}>
            <button type="submit" id={`route-${view.route}-${gate.paused ? "resume" : "pause"}`}>
              {gate.paused ? "Resume (send held deliveries, oldest first)" : "Pause this route"}
            </button>
          </form>
        </RoleGate>
      )}
    </div>
  );
}
