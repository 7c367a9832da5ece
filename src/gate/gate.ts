import { DurableObject } from "cloudflare:workers";
import { logError } from "../lib/log";
import { count, execCounted } from "../lib/meter";
import { reportObservations } from "../monitor/report";
import { breakerReporter } from "./client";
import type { DeliveryControl } from "./control";
import {
  type Admission,
  type AdmitOptions,
  type AttemptVerdict,
  admit,
  CLOSED_BREAKER,
  EMPTY_GATE,
  type GateState,
  release,
} from "./decide";

/**
 * One route's gate (docs/routing.md "Delivery control"): a Durable Object per (source, route), named
 * `<source>/<route>`, asked only by routes that configure a control option. Its whole state is one small value
 * (decide.ts decides; this stores), plus the deliveries held while the route is paused, so a resume can send them
 * in received order. The route's control comes with every call, from the config the caller loaded: the gate never
 * reads config of its own.
 */

const SCHEMA = `
CREATE TABLE IF NOT EXISTS gate_state (id INTEGER PRIMARY KEY CHECK (id = 1), state TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS paused_deliveries (receipt_id TEXT PRIMARY KEY, database TEXT NOT NULL) WITHOUT ROWID;
`;

/** A delivery as the consumer asks about it: its receipt id (a ULID, so it sorts in received order) and its database. */
export interface GateDelivery {
  id: string;
  database: string;
}

export interface GateStatus {
  paused: boolean;
  breakerOpen: boolean;
  openedAt: number | null;
  failures: number;
  inFlight: number;
  held: number;
}

export class DeliveryGate extends DurableObject<Env> {
  private readonly sql: SqlStorage;
  private state: GateState;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec(SCHEMA);
    const row = this.sql.exec<{ state: string }>("SELECT state FROM gate_state WHERE id = 1").toArray()[0];
    this.state = row ? (JSON.parse(row.state) as GateState) : { ...EMPTY_GATE };
  }

  admit(
    control: DeliveryControl,
    deliveries: readonly GateDelivery[],
    now: number,
    options: AdmitOptions,
  ): Pick<Admission, "admitted" | "held"> {
    count("doRequests");
    const { state, admitted, held } = admit(
      this.state,
      control,
      deliveries.map((delivery) => delivery.id),
      now,
      options,
    );
    this.store(state);
    const paused = new Set(held.filter((hold) => hold.reason === "paused").map((hold) => hold.id));
    for (const delivery of deliveries) {
      if (paused.has(delivery.id))
        execCounted(
          this.sql,
          "INSERT OR IGNORE INTO paused_deliveries (receipt_id, database) VALUES (?, ?)",
          delivery.id,
          delivery.database,
        );
    }
    return { admitted, held };
  }

  async release(
    control: DeliveryControl,
    finished: readonly { id: string; verdict: AttemptVerdict }[],
    now: number,
    routeName: string,
  ): Promise<void> {
    count("doRequests");
    const { state, transition } = release(this.state, control, finished, now);
    this.store(state);
    if (transition === null) return;
    const firing = transition === "opened";
    const message = firing
      ? `Route ${routeName}: ${state.failures} attempts failed in a row; its deliveries are held, one probe per ${Math.round(control.breaker!.probeIntervalMs / 1000)} s, until one succeeds.`
      : `Route ${routeName}: a delivery succeeded; the circuit breaker is closed.`;
    // The alert is the monitor's (one incident however often it is reported); a monitor that fails to answer
    // leaves the breaker as it is, and the next transition reports again.
    await reportObservations(
      this.env,
      [{ kind: "route-breaker-open", reporter: breakerReporter(routeName), firing, message }],
      true,
    ).catch((error) => logError("gate.alert_failed", error, { route: routeName }));
  }

  pause(): GateStatus {
    this.store({ ...this.state, paused: true });
    return this.status();
  }

  /** Unpauses, and hands back the deliveries held meanwhile in received order, for the caller to send on. */
  resume(): { status: GateStatus; held: GateDelivery[] } {
    this.store({ ...this.state, paused: false });
    const held = this.sql
      .exec<{ receipt_id: string; database: string }>(
        "SELECT receipt_id, database FROM paused_deliveries ORDER BY receipt_id",
      )
      .toArray()
      .map((row) => ({ id: row.receipt_id, database: row.database }));
    this.sql.exec("DELETE FROM paused_deliveries");
    return { status: this.status(), held };
  }

  /**
   * The route left the config (src/reconcile/route-gates.ts): its admin pause, held deliveries and breaker go, so a
   * route of that name added again starts clean. The held deliveries lose nothing: each is still a row in D1 that
   * looks again on its own. Answers what the gate held.
   */
  forget(): GateStatus {
    const held = this.status();
    this.ctx.storage.transactionSync(() => {
      execCounted(this.sql, "DELETE FROM paused_deliveries");
      execCounted(this.sql, "DELETE FROM gate_state");
    });
    this.state = { ...EMPTY_GATE };
    return held;
  }

  /** The route's config has no breaker any more: closed now, not at its next attempt (there may never be one). */
  closeBreaker(): GateStatus {
    this.store({ ...this.state, ...CLOSED_BREAKER });
    return this.status();
  }

  status(): GateStatus {
    const held = this.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM paused_deliveries").one().n;
    return {
      paused: this.state.paused,
      breakerOpen: this.state.openedAt !== null,
      openedAt: this.state.openedAt,
      failures: this.state.failures,
      inFlight: Object.keys(this.state.inFlight).length + (this.state.probe ? 1 : 0),
      held,
    };
  }

  /** Writes only a changed state: a gate asked and answered the same way costs no row. */
  private store(state: GateState): void {
    const text = JSON.stringify(state);
    if (text === JSON.stringify(this.state)) return;
    execCounted(
      this.sql,
      "INSERT INTO gate_state (id, state) VALUES (1, ?) ON CONFLICT (id) DO UPDATE SET state = excluded.state",
      text,
    );
    this.state = state;
  }
}
