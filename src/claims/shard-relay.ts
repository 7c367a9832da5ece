import { logError } from "../lib/log";
import { count } from "../lib/meter";
import type { RelayReport } from "../model/claims";
import { shardThresholds } from "../monitor/conditions";
import type { ShardWatch } from "../monitor/shard-watch";
import { relayToD1 } from "../relay/relay";
import { bodyThresholdOf } from "../sources/registry";
import {
  markRelayed,
  RELAY_BATCH,
  unrelayedCount,
  type WaitingClaim,
  waitingClaimsAfter,
  withinBudget,
} from "./claim-table";
import {
  markQuarantineRelayed,
  UNRELAYED_QUARANTINES,
  WAITING_QUARANTINES,
  type WaitingQuarantine,
} from "./quarantine";
import { RelayFailures, STORE_FULL_RETRY_MS } from "./relay-failures";
import { relaySettings } from "./relay-settings";
import { relayDelayForClaim } from "./relay-timing";

/**
 * A claim shard's relay (./shard.ts owns one): when its alarm is set, the batch it moves into D1 and onto the queue
 * (src/relay/relay.ts), and the tombstones it leaves behind once they hold the work. Acknowledged claims stay in the
 * shard until then, whatever fails: a crash or a failed relay leaves them for the next alarm or the cron's visit.
 */
export class ShardRelay {
  /**
   * Whether this instance has an alarm pending. Kept in memory so a claim never pays for getAlarm: a fresh
   * instance sets the alarm once more than needed, which costs one row, never a lost relay.
   */
  private armed = false;
  /** Claims accepted since the relay last read its batch: a full batch does not wait out the delay. */
  private claimsWaiting = 0;
  /** While relays fail (D1 or the queue down): the streak, the backoff and the claims' early probe. */
  private readonly failures: RelayFailures;
  /** Where the last relay batch ended, so a large backlog is relayed round-robin through the key space. */
  private cursor = "";
  private running: Promise<RelayReport> | null = null;
  /** When this instance's last relay finished: an idle shard relays a claim at once, a busy one gathers (./relay-timing.ts). */
  private lastEndedAt: number | null = null;
  /**
   * How long claims gather before a relay at a busy shard (a longer wait means fewer alarms, D1 calls and queue
   * operations per event under load; an idle shard relays at once, ./relay-timing.ts), and whether a full batch
   * waits it out too (the bench's held-back receiver): RELAY_DELAY_MS and RELAY_HELD_BACK, read strictly and
   * bounded (./relay-settings.ts).
   */
  private readonly delayMs: number;
  private readonly fullBatchWaits: boolean;

  constructor(
    /**
     * The shard's storage and env as they are now, read at each use as the shard itself does (the tests swap a live
     * instance's bindings, and its `ctx` to watch the alarms it sets).
     */
    private readonly storageNow: () => DurableObjectStorage,
    private readonly envNow: () => Env,
    /** The shard's partitions, the same array it keeps up to date (./partitions.ts). */
    private readonly partitions: readonly { generation: number }[],
    /** Tells the system monitor what a failed relay revealed (D1 unreachable, backlog, size), once per change. */
    private readonly watch: ShardWatch,
  ) {
    ({ delayMs: this.delayMs, fullBatchWaits: this.fullBatchWaits } = relaySettings(envNow()));
    this.failures = new RelayFailures(storageNow().sql);
  }

  private get storage(): DurableObjectStorage {
    return this.storageNow();
  }

  private get env(): Env {
    return this.envNow();
  }

  /** A relay is running: its claims' partitions must stay until it has turned them into tombstones. */
  get underWay(): boolean {
    return this.running !== null;
  }

  /** After a claim that waits for the relay: arm the alarm, bring it forward for a full batch, or probe an outage. */
  async afterClaim(): Promise<void> {
    this.claimsWaiting++;
    if (!this.armed) await this.arm(this.delayForClaim());
    else if (this.claimsWaiting === RELAY_BATCH && !this.failures.failing && !this.fullBatchWaits) await this.arm(0);
    else if (this.failures.probeDue(Date.now())) {
      this.failures.probing();
      await this.arm(0);
    }
  }

  /** A lone claim at an idle shard goes at once; claims at a busy one gather for the window (./relay-timing.ts). */
  private delayForClaim(): number {
    return relayDelayForClaim({
      now: Date.now(),
      lastRelayEndedAt: this.lastEndedAt,
      gatherMs: this.delayMs,
      fullBatchWaits: this.fullBatchWaits,
    });
  }

  /** The alarm: one batch, then the next alarm as the outcome asks (at once, after the window, backed off, none). */
  async onAlarm(): Promise<void> {
    this.armed = true;
    let report: RelayReport;
    try {
      report = await this.relay();
    } catch (error) {
      // D1 or the queue is unreachable: keep everything and try again later. Acknowledged work stays here.
      const { failures, backoffMs } = this.failures.failed(Date.now());
      logError("relay.failed", error, { failures });
      await this.arm(backoffMs);
      await this.watch.afterFailure(this.env, {
        failures,
        backlog: this.unrelayedCount(shardThresholds(this.env).backlog),
        storageBytes: this.storage.sql.databaseSize,
      });
      return;
    }
    this.failures.clear();
    // No await between reading the backlog and disarming: a claim arriving later sees `armed` false. A full
    // batch still waiting goes at once; the few that came in while this batch was relayed wait for company. A
    // batch that all waits for room in a full database tries again later, never at once.
    if (report.heldBack > 0 && report.receiptsRelayed + report.quarantinesRelayed === 0)
      await this.arm(STORE_FULL_RETRY_MS);
    else if (report.remaining >= RELAY_BATCH) await this.arm(0);
    else if (report.remaining > 0) await this.arm(this.delayMs);
    else this.armed = false;
    await this.watch.afterSuccess(this.env);
  }

  /**
   * Relays one batch now. Called by the alarm, and by the cron and tests through RPC. Overlapping calls share one
   * batch: D1's awaits let a second call in, and two relays of the same rows would send each one to the queue twice.
   */
  relay(): Promise<RelayReport> {
    this.running ??= this.relayBatch().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  /**
   * After the cron's visit relayed: a shard whose alarm had backed off during an outage (or lost its alarm) goes on
   * draining now, not at the backed-off time.
   */
  async resumeAfterVisit(remaining: number): Promise<void> {
    const wasFailing = this.failures.clear();
    if (remaining > 0 && (wasFailing || !this.armed)) await this.arm(0);
  }

  /** Claims and quarantines not yet in D1 (counted up to `cap`, reading only the backlog's own keys). */
  unrelayedCount(cap = Number.MAX_SAFE_INTEGER): number {
    return unrelayedCount(this.storage.sql, this.partitions, UNRELAYED_QUARANTINES, cap);
  }

  private async relayBatch(): Promise<RelayReport> {
    const sql = this.storage.sql;
    this.claimsWaiting = 0;
    const claims = this.waitingClaims();
    const quarantines = withinBudget<WaitingQuarantine>(sql, WAITING_QUARANTINES, RELAY_BATCH);

    const { held, storeObservations, ...outcome } = await relayToD1(
      this.env,
      claims,
      quarantines,
      bodyThresholdOf(this.env),
      this.failures.failing,
    );

    // Only now, with D1 and the queue holding the work, turn each claim into its dedupe tombstone. What a full
    // database held back stays as it is, waiting.
    const relayedAt = Date.now();
    this.storage.transactionSync(() => {
      for (const claim of claims) {
        if (!held.receiptIds.has(claim.receiptId)) markRelayed(sql, claim);
      }
      for (const quarantine of quarantines) {
        if (!held.quarantineIds.has(quarantine.quarantineId)) markQuarantineRelayed(sql, quarantine, relayedAt);
      }
    });
    this.lastEndedAt = relayedAt;
    await this.watch.afterRelay(this.env, storeObservations);
    const last = claims.at(-1);
    if (last) this.cursor = last.claimKey;
    // Counted only far enough to say "another batch waits": a count per batch over the whole backlog would make
    // draining it quadratic.
    const heldBack = held.receiptIds.size + held.quarantineIds.size;
    return { ...outcome, heldBack, remaining: this.unrelayedCount(RELAY_BATCH) };
  }

  /** The next batch, round-robin from where the last one ended so no key waits behind a busy stretch. */
  private waitingClaims(): WaitingClaim[] {
    const query = (afterKey: string) => waitingClaimsAfter(this.storage.sql, this.partitions, afterKey);
    const batch = query(this.cursor);
    if (batch.length > 0 || this.cursor === "") return batch;
    this.cursor = "";
    return query("");
  }

  /** Cloudflare bills each setAlarm as a row written; the meter counts it the same way. */
  private async arm(delayMs: number): Promise<void> {
    this.armed = true;
    count("doAlarmWrites");
    count("doRowsWritten");
    await this.storage.setAlarm(Date.now() + delayMs);
  }
}
