import { count } from "../lib/meter";
import type { IssueCondition } from "../monitor/issues/types";
import { type SignatureThresholds, signatureConditions, signatureThresholds } from "../monitor/signature-spike";
import type { SignatureCounts } from "../monitor/signature-tally";
import { SignatureBuckets } from "./signature-buckets";

/**
 * The system monitor's part in signature-failure issues: it keeps the counts the isolates flush
 * (./signature-buckets.ts) and turns the window into conditions (src/monitor/signature-spike.ts). The monitor
 * always knows this kind in full, so an issue whose window has cleared resolves at the next evaluation.
 */
export class SignatureWatch {
  private readonly buckets: SignatureBuckets;
  private readonly thresholds: SignatureThresholds;

  constructor(sql: SqlStorage, env: Env) {
    this.buckets = new SignatureBuckets(sql);
    this.thresholds = signatureThresholds(env);
  }

  record(report: readonly SignatureCounts[], now: number): void {
    // One request per isolate per interval: billed as any other, and counted where the bench reads meters.
    count("doRequests");
    this.buckets.add(report, now, this.thresholds.windowMs);
  }

  conditions(now: number, openSources: ReadonlySet<string>): IssueCondition[] {
    return signatureConditions(this.buckets.windows(now, this.thresholds), openSources, this.thresholds);
  }

  /** The sources whose verified counts the isolates should send: refused in the window, or with an open issue. */
  watched(now: number, openSources: ReadonlySet<string>): string[] {
    const refused = this.buckets
      .windows(now, this.thresholds)
      .filter((window) => window.rejected > 0)
      .map((window) => window.source);
    return [...new Set([...refused, ...openSources])];
  }
}
