import type { QuarantineList } from "../../receipts/quarantine-slice";
import { formatInstant } from "../format";
import { Page } from "../layout";

export function QuarantinePage(props: { page: QuarantineList }) {
  return (
    <Page title="Quarantine" current="/admin/quarantine">
      <h1>Quarantine</h1>
      <p class="muted">
        Deliveries that reused an event key with different bytes. They are kept for a human and never processed: the
        first few copies of a key whole, and past them one row counting the rest, without their bodies.
      </p>
      {props.page.quarantine.length === 0 ? (
        <p class="muted">Nothing quarantined.</p>
      ) : (
        <table id="quarantine" class="rows">
          <thead>
            <tr>
              <th>Received</th>
              <th>Source</th>
              <th>Event key</th>
              <th>Reason</th>
              <th class="num">Copies</th>
              <th>Original receipt</th>
              <th>Payload SHA-256</th>
            </tr>
          </thead>
          <tbody>
            {props.page.quarantine.map((record) => (
              <tr>
                <td data-label="Received">{formatInstant(record.receivedAt)}</td>
                <td data-label="Source">{record.source}</td>
                <td data-label="Event key" class="mono">
                  {record.eventKey}
                </td>
                <td data-label="Reason">{record.reason}</td>
                <td data-label="Copies" class="num">
                  {record.copies === 1 ? "1" : `${record.copies} (bodies not kept)`}
                </td>
                <td data-label="Original receipt" class="mono">
                  {record.originalReceiptId ? (
                    <a href={`/admin/receipts/${record.originalReceiptId}`}>{record.originalReceiptId}</a>
                  ) : (
                    "—"
                  )}
                </td>
                <td data-label="Payload SHA-256" class="mono">
                  {record.payloadSha256.slice(0, 16)}…
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </Page>
  );
}
