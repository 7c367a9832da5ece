import { logError } from "../lib/log";
import { relayFailureObservations, shardThresholds, storageObservations } from "./conditions";
import type { Observation, SystemAlertKind } from "./observation";
import { d1Answers, reportObservations } from "./report";

/**
 * A claim shard's side of self-monitoring. After a failed relay it checks whether D1 answers, looks at its own
 * backlog and size, and tells the system monitor, but only what changed since it last told it: a relay failing
 * on every backed-off retry sends nothing new. The kinds it has reported firing are kept in its own SQLite, so an
 * evicted shard still reports them quiet after its next successful relay. A successful relay with nothing
 * reported costs one read of an empty table per instance, and nothing after.
 *
 * It also passes on what its relays saw of a database's size ("d1-storage", "d1-full", reported as
 * `database:<binding>`), keyed by kind and that reporter, since one shard may relay into several databases.
 */
const SCHEMA = "CREATE TABLE IF NOT EXISTS watch_reported (kind TEXT PRIMARY KEY)";
/** What the table's `kind` column holds: the kind itself for the shard's own reports, else kind and reporter. */
type WatchKey = string;
const RELAY_KINDS: ReadonlySet<SystemAlertKind> = new Set(["d1-unreachable", "relay-failing"]);

export class ShardWatch {
  private reported: Set<WatchKey> | null = null;

  constructor(
    private readonly sql: SqlStorage,
    private readonly reporter: string,
  ) {}

  async afterFailure(env: Env, facts: { failures: number; backlog: number; storageBytes: number }): Promise<void> {
    const d1 = await d1Answers(env);
    await this.tell(
      env,
      relayFailureObservations(this.reporter, { ...facts, d1Reachable: d1.reachable }, shardThresholds(env)),
      d1.reachable,
    );
  }

  /** D1 took the batch: the relay problems this shard reported are over (backlog and size are the visit's to clear). */
  async afterSuccess(env: Env): Promise<void> {
    const reported = [...this.load()].filter((key): key is SystemAlertKind => RELAY_KINDS.has(key as SystemAlertKind));
    if (reported.length === 0) return;
    await this.tell(
      env,
      reported.map((kind) => ({ kind, reporter: this.reporter, firing: false, message: `${kind} cleared` })),
      true,
    );
  }

  /** What a relay saw of the databases it went to (src/relay/database-room.ts): told when it changed. */
  async afterRelay(env: Env, storeObservations: Observation[]): Promise<void> {
    if (storeObservations.length > 0) await this.tell(env, storeObservations, true);
  }

  /** A new key refused at the shard's size limit: "shard-full" (and "shard-storage") told once, not per claim. */
  async atLimit(env: Env, storageBytes: number): Promise<void> {
    const sized = storageObservations(this.reporter, { backlog: 0, storageBytes }, shardThresholds(env));
    await this.tell(
      env,
      sized.filter((observation) => observation.kind !== "shard-backlog"),
      true,
    );
  }

  /** The cron's visit: backlog and size checked whether or not the relay fails (tombstones grow a healthy shard). */
  async afterVisit(env: Env, facts: { backlog: number; storageBytes: number }): Promise<void> {
    await this.tell(env, storageObservations(this.reporter, facts, shardThresholds(env)), true);
  }

  private async tell(env: Env, observations: Observation[], d1Reachable: boolean): Promise<void> {
    const reported = this.load();
    const changed = observations.filter((observation) => observation.firing !== reported.has(this.keyOf(observation)));
    if (changed.length === 0) return;
    try {
      await reportObservations(env, changed, d1Reachable);
    } catch (error) {
      // The monitor itself unreachable: the log line is the alert; the next failure tries again.
      logError("monitor.report_failed", error, { reporter: this.reporter });
      return;
    }
    for (const observation of changed) {
      const key = this.keyOf(observation);
      if (observation.firing) {
        reported.add(key);
        this.sql.exec("INSERT OR IGNORE INTO watch_reported (kind) VALUES (?)", key);
      } else {
        reported.delete(key);
        this.sql.exec("DELETE FROM watch_reported WHERE kind = ?", key);
      }
    }
  }

  private keyOf(observation: Observation): WatchKey {
    return observation.reporter === this.reporter ? observation.kind : `${observation.kind} ${observation.reporter}`;
  }

  private load(): Set<WatchKey> {
    if (this.reported === null) {
      this.sql.exec(SCHEMA);
      this.reported = new Set(
        this.sql
          .exec<{ kind: WatchKey }>("SELECT kind FROM watch_reported")
          .toArray()
          .map((row) => row.kind),
      );
    }
    return this.reported;
  }
}
