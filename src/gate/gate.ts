import { DurableObject } from "cloudflare:workers";
import { logError } from "../lib/log";
import { count, execCounted } from "../lib/meter";
import { reportObservations } from "../monitor/report";
import { breakerReporter } from "./breaker-reporter";
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
  wake,
} from "./decide";

/**
 * One route's gate (docs/routing.md "Delivery control"): a Durable Object per (source, route), named
 * `<source>/<route>`, asked only by routes that configure a control option. Its whole state is one small value
 * (decide.ts decides; this stores), plus the deliveries held while the route is paused, so a resume can send them
 * in received order, and those held for a slot under max_in_flight, so the release that frees one wakes the oldest. The route's control comes with every call, from the config the caller loaded: the gate never
 * reads config of its own.
 */

const SCHEMA = `
CREATE TABLE IF NOT EXISTS gate_state (id INTEGER PRIMARY KEY CHECK (id = 1), state TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS paused_deliveries (receipt_id TEXT PRIMARY KEY, database TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS slot_waiting (receipt_id TEXT PRIMARY KEY, database TEXT NOT NULL) WITHOUT ROWID;
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
  /** The latest recovery its closing breaker started (`recover = "auto"`): the replay job's key, and when. */
  recovery: { jobKey: string; startedAt: number } | null;
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
  ): Pick<Admission, "admitted" | "startAt" | "held"> {
    count("doRequests");
    const { state, admitted, startAt, held } = admit(
      this.state,
      control,
      deliveries.map((delivery) => delivery.id),
      now,
      options,
    );
    this.store(state);
    const paused = new Set(held.filter((hold) => hold.reason === "paused").map((hold) => hold.id));
    const waitingForSlot = new Set(held.filter((hold) => hold.reason === "max-in-flight").map((hold) => hold.id));
    for (const delivery of deliveries) {
      if (paused.has(delivery.id))
        execCounted(
          this.sql,
          "INSERT OR IGNORE INTO paused_deliveries (receipt_id, database) VALUES (?, ?)",
          delivery.id,
          delivery.database,
        );
      if (waitingForSlot.has(delivery.id))
        execCounted(
          this.sql,
          "INSERT OR IGNORE INTO slot_waiting (receipt_id, database) VALUES (?, ?)",
          delivery.id,
          delivery.database,
        );
    }
    // Admitted, by a wake or on its own: no longer waiting for a slot.
    if (control.maxInFlight !== null && admitted.length > 0)
      execCounted(
        this.sql,
        "DELETE FROM slot_waiting WHERE receipt_id IN (SELECT value FROM json_each(?))",
        JSON.stringify(admitted),
      );
    return { admitted, startAt, held };
  }

  async release(
    control: DeliveryControl,
    finished: readonly { id: string; verdict: AttemptVerdict }[],
    now: number,
    routeName: string,
  ): Promise<{ woken: GateDelivery[]; recoverFrom: number | null }> {
    count("doRequests");
    const released = release(this.state, control, finished, now);
    const { state, woken } = this.wakeWaiting(released.state, control, now);
    this.store(state);
    const { transition, failingSince } = released;
    if (transition === null) return { woken, recoverFrom: null };
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
    // Closed again with `recover = "auto"`: the caller replays what died since the failures began (route-recovery.ts).
    return { woken, recoverFrom: !firing && control.recover ? failingSince : null };
  }

  /**
   * The oldest deliveries waiting for a slot, as many as the release left free, each given a slot and taken off the
   * list: the caller sends them on at once (src/consumers/gate/delivery-release.ts). A send that fails loses nothing:
   * each still looks again on its own (SLOT_WAIT_FALLBACK_MS).
   */
  private wakeWaiting(
    state: GateState,
    control: DeliveryControl,
    now: number,
  ): { state: GateState; woken: GateDelivery[] } {
    if (control.maxInFlight === null) return { state, woken: [] };
    const waiting = execCounted<{ receipt_id: string; database: string }>(
      this.sql,
      "SELECT receipt_id, database FROM slot_waiting ORDER BY receipt_id LIMIT ?",
      control.maxInFlight,
    );
    const woken = wake(
      state,
      control,
      waiting.map((row) => row.receipt_id),
      now,
    );
    if (woken.woken.length === 0) return { state, woken: [] };
    execCounted(
      this.sql,
      "DELETE FROM slot_waiting WHERE receipt_id IN (SELECT value FROM json_each(?))",
      JSON.stringify(woken.woken),
    );
    const databaseOf = new Map(waiting.map((row) => [row.receipt_id, row.database]));
    return {
      state: woken.state,
      woken: woken.woken.map((id) => ({ id, database: databaseOf.get(id)! })),
    };
  }

  /** Records the recovery job a closing breaker started, so the route's view shows it. */
  noteRecovery(jobKey: string, startedAt: number): GateStatus {
    this.store({ ...this.state, recovery: { jobKey, startedAt } });
    return this.status();
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
      execCounted(this.sql, "DELETE FROM slot_waiting");
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
      recovery: this.state.recovery ?? null,
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
