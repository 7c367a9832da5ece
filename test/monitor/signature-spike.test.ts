import { describe, expect, it } from "vitest";
import {
  DEFAULT_SIGNATURE_THRESHOLDS,
  signatureConditions,
  signatureThresholds,
} from "../../src/monitor/signature-spike";

/** The decision behind signature-failure issues (src/monitor/signature-spike.ts), as a pure function. */

const window = (rejected: number, verified: number, source = "stripe") => ({
  source,
  rejected,
  verified,
  reasons: { "signature-mismatch": rejected },
});

describe("signature-failure thresholds", () => {
  it("opens only past both the floor and the share", () => {
    const none = new Set<string>();
    // Under the floor of 10, even all refused.
    expect(signatureConditions([window(9, 0)], none)).toEqual([]);
    // Past the floor, but a small share of a busy source.
    expect(signatureConditions([window(40, 100)], none)).toEqual([]);
    // Past both: half refused is a warning, nine in ten critical.
    expect(signatureConditions([window(10, 10)], none).map((c) => c.severity)).toEqual(["warning"]);
    expect(signatureConditions([window(90, 10)], none).map((c) => c.severity)).toEqual(["critical"]);
    expect(signatureConditions([window(10, 10)], none)[0]).toMatchObject({
      kind: "signature-failures",
      source: "stripe",
      route: null,
      store: null,
    });
  });

  it("keeps an open issue until the share falls under the resolve bar, with no floor", () => {
    const open = new Set(["stripe"]);
    expect(signatureConditions([window(3, 9)], open)).toHaveLength(1);
    expect(signatureConditions([window(2, 9)], open)).toEqual([]);
    expect(signatureConditions([window(0, 9)], open)).toEqual([]);
    // Another source's open issue keeps nothing of this one.
    expect(signatureConditions([window(3, 9, "github")], open)).toEqual([]);
  });

  it("names the counts, the share and the reasons, never more", () => {
    const [condition] = signatureConditions(
      [{ source: "stripe", rejected: 12, verified: 4, reasons: { "signature-mismatch": 9, "missing-signature": 3 } }],
      new Set(),
    );
    expect(condition!.message).toBe(
      "12 deliveries of 16 (75 %) failed the signature check in the last 15 minutes " +
        "(signature-mismatch 9, missing-signature 3): if the sender rotated its secret, add the new one to the source's secrets.",
    );
  });

  it("reads its thresholds from the optional vars, keeping defaults for what is unset or not a number", () => {
    expect(signatureThresholds({})).toEqual(DEFAULT_SIGNATURE_THRESHOLDS);
    expect(
      signatureThresholds({
        SIGNATURE_ISSUE_MIN_REJECTIONS: "50",
        SIGNATURE_ISSUE_OPEN_PERCENT: "30",
        SIGNATURE_ISSUE_RESOLVE_PERCENT: "60",
        SIGNATURE_ISSUE_CRITICAL_PERCENT: "lots",
      }),
    ).toEqual({ ...DEFAULT_SIGNATURE_THRESHOLDS, minRejections: 50, openShare: 0.3, resolveShare: 0.3 });
  });
});
