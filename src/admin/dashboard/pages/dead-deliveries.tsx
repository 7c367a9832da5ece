import type { Role } from "../../guards/actor";
import type { DeadDeliveriesPage } from "../../receipts/dead-deliveries";
import { DEAD_DELIVERIES_CURSOR } from "../../receipts/dead-deliveries";
import { formatInstant, withQuery } from "../format";
import { RoleGate } from "../role-gate";

/**
 * The dead letters page's further deliveries: a receipt's route 2–16 that died while the receipt's own delivery
 * may have been processed, so it is in no receipt's dead status. Each row replays that one route's delivery (the
 * per-route replay, nothing else of the receipt runs); its receipt's page shows every route.
 */
export function DeadDeliveriesSection(props: {
  page: DeadDeliveriesPage;
  query: Record<string, string | undefined>;
  role: Role;
}) {
  const { deadDeliveries, deadDeliveriesCursor } = props.page;
  return (
    <section id="dead-deliveries">
      <h2>Dead deliveries of further routes</h2>
      {deadDeliveries.length === 0 ? (
        <p class="muted">No further route's delivery is dead.</p>
      ) : (
        <table class="rows">
          <thead>
            <tr>
              <th>Received</th>
              <th>Source</th>
              <th>Route</th>
              <th>Event key</th>
              <th>Type</th>
              <th class="num">Attempts</th>
              <th>Error</th>
              <th />
            </tr>
          </thead>
          <tbody>
            {deadDeliveries.map((delivery) => (
              <tr data-receipt={delivery.receiptId} data-route={delivery.route}>
                <td data-label="Received">
                  <a href={`/admin/receipts/${delivery.receiptId}`}>{formatInstant(delivery.receivedAt)}</a>
                </td>
                <td data-label="Source">{delivery.source}</td>
                <td data-label="Route" class="mono">
                  {delivery.route}
                </td>
                <td data-label="Event key" class="mono">
                  {delivery.eventKey}
                </td>
                <td data-label="Type">{delivery.eventType ?? "—"}</td>
                <td data-label="Attempts" class="num">
                  {delivery.attempts}
                </td>
                <td data-label="Error">{delivery.lastError ?? "—"}</td>
                <td>
                  <RoleGate role={props.role} needs="operator" doing="replay">
                    <form
                      method="post"
                      action={`/admin/receipts/${delivery.receiptId}/routes/${encodeURIComponent(delivery.route)}/replay`}
                    >
                      <button type="submit">Replay this route</button>
                    </form>
                  </RoleGate>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {deadDeliveriesCursor && (
        <p class="pager">
          <a
            id="next-dead-deliveries"
            href={withQuery("/admin/dead", props.query, { [DEAD_DELIVERIES_CURSOR]: deadDeliveriesCursor })}
          >
            More dead deliveries →
          </a>
        </p>
      )}
    </section>
  );
}
