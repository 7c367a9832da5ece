import { DurableObject } from "cloudflare:workers";
import { count, type MeterReading, meterReading } from "../lib/meter";
import { ulid } from "../lib/ulid";
import {
  type ClaimRequest,
  type ClaimResult,
  claimKeyFixesContent,
  claimKeyOf,
  type RelayReport,
} from "../model/claims";
import { isSameEvent } from "../model/same-event";
import { shardThresholds, shardVerdict } from "../monitor/conditions";
import { ShardWatch } from "../monitor/shard-watch";
import { holdsNothing, insertClaim, type Tombstone, tombstoneOf } from "./claim-table";
import { countDuplicate, type DuplicateCount, duplicateCountsSince, pruneDuplicateCounts } from "./duplicate-counts";
import {
  type HandoverCursor,
  handoverPage,
  insertTombstone,
  type KnownKey,
  knownKey,
  readClosedEpochs,
  recordClosedEpoch,
} from "./epoch";
import type { PreviousOwner } from "./epoch-config";
import { expirePartitions, readPartitions } from "./partitions";
import { pruneQuarantine, quarantineCopy } from "./quarantine";
import { shardAt } from "./routing";
import { type SecretUse, SecretUseStamps } from "./secret-use";
import { ShardRelay } from "./shard-relay";
import { CLAIMS_SCHEMA, migrateLegacyClaims, migrateUnsignedKeyColumn } from "./shard-schema";

/**
 * A claim shard owns a slice of one source's event keys. Durable Objects run one event at a time, and the
 * check-and-insert below runs with no await between the check and the write, in the object's implicit transaction,
 * so two copies of one delivery cannot both be "accepted": no other request can slip in between.
 * The RPC's answer leaves the object only after its writes are durable (the output gate), which is what lets
 * the Worker acknowledge with a 2xx.
 *
 * The claims' rows and what each costs: ./claim-table.ts. The relay, its alarm and its backoff: ./shard-relay.ts.
 * The duplicate tally: ./duplicate-counts.ts.
 */

/** `remaining` in a relay report counts at most this many: it only has to say "more", never scan a backlog. */
const REMAINING_COUNT_CAP = 1000;

/** What one cron visit did: claims relayed, claims still waiting (counted up to a cap), tombstones forgotten. */
export type SweepReport = { relayed: number; remaining: number; keysPruned: number };

export class ClaimShard extends DurableObject<Env> {
  private readonly sql: SqlStorage;
  /** The claims' time partitions kept, newest (where claims go) first: ./partitions.ts. */
  private readonly partitions: ReturnType<typeof readPartitions>;
  /** The relay of this shard's claims into D1 and onto the queue, and its alarm. */
  private readonly relayer: ShardRelay;
  /** Tells the system monitor what a refused claim or a failed relay revealed, once per change. */
  private readonly watch: ShardWatch;
  /** Shard epochs every key of which this shard now holds: claims no longer consult their previous owner. */
  private readonly closedEpochs: Set<string>;
  private epochConsults = 0;
  /** When each secret of a rotation last verified a claim here, stamped at most once an hour (./secret-use.ts). */
  private readonly secretUse: SecretUseStamps;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec(CLAIMS_SCHEMA);
    this.partitions = readPartitions(this.sql);
    if (this.partitions.some((partition) => partition.generation === 0)) {
      migrateUnsignedKeyColumn(this.sql);
      migrateLegacyClaims(this.sql);
    }
    this.watch = new ShardWatch(this.sql, `shard:${ctx.id.name ?? ctx.id.toString().slice(0, 16)}`);
    this.closedEpochs = readClosedEpochs(this.sql);
    this.secretUse = new SecretUseStamps(this.sql);
    this.relayer = new ShardRelay(
      () => this.ctx.storage,
      () => this.env,
      this.partitions,
      this.watch,
    );
  }

  /**
   * The whole claim, with no await until the alarm is armed. Each outcome writes one statement at most (the claim,
   * the quarantine row or the duplicate tally) after a check with no await in between, so the object's implicit
   * transaction for the turn makes it atomic, and the output gate holds the answer until it is durable; an explicit
   * `transactionSync` would add a savepoint per claim and nothing else.
   */
  async claim(request: ClaimRequest, previous?: PreviousOwner): Promise<ClaimResult> {
    count("doRequests");
    const claimKey = claimKeyOf(request);
    let existing = knownKey(this.sql, this.partitions, request.source, claimKey);
    if (!existing && previous && !this.closedEpochs.has(previous.epoch)) {
      // A shard epoch (./epoch-config.ts): the key may be known to the shard that owned it before the change. Ask
      // first, then decide here, so this shard stays the key's one arbiter. The await lets other claims in: read
      // again after it, and a copy claimed here meanwhile stands.
      const known = await this.consultPrevious(previous, request.source, claimKey);
      existing = knownKey(this.sql, this.partitions, request.source, claimKey);
      if (!existing && known) {
        insertTombstone(this.sql, this.partitions, request.source, known);
        existing = known;
      }
    }
    // Synchronous unless refusing: no await between the check above and the write below.
    const fullAt = existing ? null : this.sizeAtLimit();
    if (fullAt !== null) await this.refuseAtLimit(fullAt);
    const result = existing ? this.claimExisting(request, existing) : this.accept(request, claimKey);
    if (request.verifiedBy !== undefined) this.secretUse.stamp(request.source, request.verifiedBy, request.receivedAt);
    if (result.disposition === "duplicate") return result;
    await this.relayer.afterClaim();
    return result;
  }

  /** One extra Durable Object request, made only for a key this shard has never seen while an epoch is open. */
  private consultPrevious(previous: PreviousOwner, source: string, claimKey: string): Promise<KnownKey | null> {
    this.epochConsults++;
    return shardAt(this.env, source, previous.jurisdiction, previous.index).knownKey(source, claimKey);
  }

  /** As a previous owner: what this shard knows of a key, for its new owner's claim. */
  knownKey(source: string, claimKey: string): KnownKey | null {
    count("doRequests");
    return knownKey(this.sql, this.partitions, source, claimKey);
  }

  /** As a previous owner: one page of the keys it holds, for the cron's handover to their new owners. */
  handoverPage(source: string, cursor: HandoverCursor, limit: number): ReturnType<typeof handoverPage> {
    count("doRequests");
    return handoverPage(this.sql, this.partitions, source, cursor, limit);
  }

  /** As a new owner: keys handed over by their previous owner, kept as tombstones unless held already. */
  adoptKeys(source: string, keys: readonly KnownKey[]): number {
    count("doRequests");
    let adopted = 0;
    this.ctx.storage.transactionSync(() => {
      for (const key of keys) {
        if (knownKey(this.sql, this.partitions, source, key.claimKey)) continue;
        insertTombstone(this.sql, this.partitions, source, key);
        adopted++;
      }
    });
    return adopted;
  }

  /** Every key of the previous layout is here now: claims stop consulting it. */
  closeEpoch(epoch: string): void {
    count("doRequests");
    recordClosedEpoch(this.sql, epoch, Date.now());
    this.closedEpochs.add(epoch);
  }

  /** Consults made by this instance and the epochs it holds closed, for the tests and the bench. Not counted. */
  epochStats(): { consults: number; closedEpochs: string[] } {
    return { consults: this.epochConsults, closedEpochs: [...this.closedEpochs].sort() };
  }

  /**
   * A new key at the shard's size limit (SHARD_SIZE_LIMIT_BYTES, src/monitor/store-limits.ts) is refused before
   * anything is written: the route answers 503 and the sender retries, so nothing acknowledged is lost, and a key
   * already known still answers (the caller checks this only for a new key). "shard-full" is told once.
   */
  private async refuseAtLimit(storageBytes: number): Promise<never> {
    await this.watch.atLimit(this.env, storageBytes);
    throw new Error(
      `This claim shard stores ${storageBytes} bytes, at its limit (SHARD_SIZE_LIMIT_BYTES): new events are refused until it has room.`,
    );
  }

  /** The shard's size when it is at its limit, else null. */
  private sizeAtLimit(): number | null {
    const storageBytes = this.sql.databaseSize;
    return shardVerdict(storageBytes, shardThresholds(this.env)) === "refuse" ? storageBytes : null;
  }

  /** A key no kept partition holds: its claim goes into the open partition. */
  private accept(request: ClaimRequest, claimKey: string): ClaimResult {
    const receiptId = ulid(request.receivedAt);
    insertClaim(this.sql, this.partitions, request, claimKey, receiptId);
    return { disposition: "accepted", receiptId };
  }

  /** A key the shard already holds: the same bytes are a duplicate, other bytes go to quarantine. */
  private claimExisting(request: ClaimRequest, existing: KnownKey): ClaimResult {
    const existingCopy = { payloadSha256: existing.payloadSha256, provenance: existing.provenance };
    if (claimKeyFixesContent(request) || isSameEvent(existingCopy, request)) {
      if (request.provenance === "live") countDuplicate(this.sql, request.source, request.receivedAt);
      return { disposition: "duplicate", receiptId: existing.receiptId };
    }
    // Same key, different bytes: the sender broke its own contract. Keep it for a human (the first few copies whole,
    // the rest counted), never process it. (Only a signed key gets here: under a payload-hash claim key the bytes
    // always match, and D1 compares them instead.)
    quarantineCopy(this.sql, request, { receiptId: existing.receiptId, payloadSha256: existing.payloadSha256 });
    return { disposition: "quarantined", receiptId: existing.receiptId };
  }

  override async alarm(): Promise<void> {
    count("doRequests");
    await this.relayer.onAlarm();
  }

  /** Relays one batch now (the alarm does the same): for the cron and tests, through RPC. */
  relay(): Promise<RelayReport> {
    return this.relayer.relay();
  }

  /** Claims and quarantines not yet in D1 (counted up to `cap`, reading only the backlog's own keys). */
  unrelayedCount(cap = Number.MAX_SAFE_INTEGER): number {
    return this.relayer.unrelayedCount(cap);
  }

  /**
   * Forgets keys older than the dedupe retention a time partition at a time (./partitions.ts): never one received
   * after `olderThan`, never an unrelayed claim (acknowledged work), never `keepKeys`. While a relay is under way
   * nothing is dropped (its claims' partitions must still be there for their tombstone update): the next visit does it.
   */
  pruneKeys(olderThan: number, keepKeys: readonly string[] = []): number {
    count("doRequests");
    const pruned = this.relayer.underWay
      ? 0
      : expirePartitions(this.ctx.storage, this.partitions, olderThan, new Set(keepKeys));
    pruneQuarantine(this.sql, olderThan);
    pruneDuplicateCounts(this.sql, olderThan);
    return pruned;
  }

  /**
   * Live duplicate deliveries per source and hour since `since` (epoch ms), for the admin stats. Duplicates never
   * reach D1 — the acknowledgement path writes nothing there — so this shard-local tally is their only count.
   */
  duplicateCounts(since: number): DuplicateCount[] {
    count("doRequests");
    return duplicateCountsSince(this.sql, since);
  }

  /** This shard's SQLite size in bytes (a Durable Object holds at most 10 GB), for the stats and /admin/api/health. */
  storageBytes(): number {
    count("doRequests");
    return this.sql.databaseSize;
  }

  /** Every secret of `source` seen verifying a claim here, for the verification health. */
  secretUseOf(source: string): SecretUse[] {
    count("doRequests");
    return this.secretUse.read(source);
  }

  /** This isolate's meter reading, for the bench and the budget test. Not itself counted as a request. */
  meters(): MeterReading {
    return meterReading();
  }

  /**
   * The cron's visit (src/reconcile): relay what is still waiting, a bounded number of batches, then forget keys
   * past the dedupe retention, except `keepKeys` (receipts still unfinished in D1). One call per shard per run, so
   * a run's subrequests stay countable.
   */
  async sweep(keyCutoff: number, relayRounds: number, keepKeys: readonly string[] = []): Promise<SweepReport> {
    count("doRequests");
    return this.visit(keyCutoff, relayRounds, keepKeys);
  }

  /**
   * The cron's visit to a retired shard, one the config no longer names (./shard-layouts.ts): the same relay and
   * prune, and whether it now holds nothing at all (no claim, tombstone, quarantine or tally), after which the
   * cron stops visiting it. Nobody claims here any more, so nothing is kept past the retention for dedupe's sake.
   */
  async drainRetired(keyCutoff: number, relayRounds: number): Promise<SweepReport & { holdsNothing: boolean }> {
    count("doRequests");
    const report = await this.visit(keyCutoff, relayRounds, []);
    return { ...report, holdsNothing: holdsNothing(this.sql, this.partitions) };
  }

  private async visit(keyCutoff: number, relayRounds: number, keepKeys: readonly string[]): Promise<SweepReport> {
    let relayed = 0;
    let remaining = this.unrelayedCount(REMAINING_COUNT_CAP);
    let rounds = 0;
    for (; rounds < relayRounds && remaining > 0; rounds++) {
      const report = await this.relay();
      relayed += report.receiptsRelayed + report.quarantinesRelayed;
      remaining = report.remaining;
      // Everything waits for room in a full database: another round now would only be refused again.
      if (report.heldBack > 0 && report.receiptsRelayed + report.quarantinesRelayed === 0) break;
    }
    if (rounds > 0) {
      await this.relayer.resumeAfterVisit(remaining);
      remaining = this.unrelayedCount(REMAINING_COUNT_CAP);
    }
    const keysPruned = this.pruneKeys(keyCutoff, keepKeys);
    // Backlog and size, told to the system monitor only when they cross its thresholds (src/monitor/).
    const backlog =
      remaining >= REMAINING_COUNT_CAP ? this.unrelayedCount(shardThresholds(this.env).backlog) : remaining;
    await this.watch.afterVisit(this.env, { backlog, storageBytes: this.sql.databaseSize });
    return { relayed, remaining, keysPruned };
  }

  /**
   * What the shard still knows about one claim key (the event key, or the payload hash for an unsigned key): the
   * dedupe tombstone, for the reconciler's checks and tests.
   */
  tombstone(source: string, claimKey: string): Tombstone | null {
    return tombstoneOf(this.sql, this.partitions, source, claimKey);
  }
}
