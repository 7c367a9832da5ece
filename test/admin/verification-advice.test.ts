import { describe, expect, it } from "vitest";
import {
  SAFE_TO_REMOVE_AFTER_MS,
  type SecretCandidate,
  verificationHealth,
} from "../../src/admin/health/verification-health";
import { outcomeCounts, outcomesSql } from "../../src/admin/stats/verification-query";

/**
 * The verification health's decisions (src/admin/health/verification-health.ts): when an older secret is still in
 * use and when it is safe to remove, from the last uses the shards stamped. Times the route cannot produce (a stamp
 * days old) are given here directly; the route itself is covered by ./verification-health.test.ts.
 */

const HOUR = 3_600_000;
const NOW = Date.UTC(2026, 11, 5, 12);
const rotation: SecretCandidate[] = [
  { name: "STRIPE_SECRET", kind: "listed", expiresAt: null },
  { name: "STRIPE_SECRET_OLD", kind: "listed", expiresAt: NOW + 24 * HOUR },
];
const use = (secretName: string, firstVerifiedAt: number, lastVerifiedAt: number) => ({
  secretName,
  firstVerifiedAt,
  lastVerifiedAt,
});

describe("verification health advice", () => {
  it("calls an older secret safe to remove once it has verified nothing for three days", () => {
    const uses = [
      use("STRIPE_SECRET", NOW - 10 * 24 * HOUR, NOW),
      use("STRIPE_SECRET_OLD", NOW - 10 * 24 * HOUR, NOW - 3 * 24 * HOUR),
    ];
    const health = verificationHealth(rotation, uses, null, NOW);
    expect(health.secrets.map((secret) => secret.advice)).toEqual(["current", "safe-to-remove"]);
    expect(health.warnings).toEqual(["`STRIPE_SECRET_OLD` last used 3 days ago; safe to remove"]);
  });

  it("keeps an older secret used within the three days, with its share when counted", () => {
    const uses = [
      use("STRIPE_SECRET", NOW - 5 * HOUR, NOW),
      use("STRIPE_SECRET_OLD", NOW - 5 * HOUR, NOW - SAFE_TO_REMOVE_AFTER_MS + HOUR),
    ];
    const counts = [
      { hour: NOW - HOUR, outcome: { kind: "verified" as const, secret: "STRIPE_SECRET" }, deliveries: 96 },
      { hour: NOW - HOUR, outcome: { kind: "verified" as const, secret: "STRIPE_SECRET_OLD" }, deliveries: 4 },
      {
        hour: NOW - HOUR,
        outcome: { kind: "rejected" as const, reason: "timestamp-out-of-tolerance" },
        deliveries: 25,
      },
    ];
    const health = verificationHealth(rotation, uses, counts, NOW);
    expect(health.secrets[1]).toMatchObject({ advice: "still-verifying", deliveries: 4, share: 0.04 });
    expect(health.warnings).toEqual(["`STRIPE_SECRET_OLD` still verifies 4 % of deliveries; last used 2 days ago"]);
    expect(health.rejectionRate).toBeCloseTo(25 / 125);
    expect(health.hourly).toEqual([
      { hour: NOW - HOUR, verified: 100, rejected: { "timestamp-out-of-tolerance": 25 } },
    ]);
  });

  it("says nothing of an older secret never seen until the source has been watched for three days", () => {
    const recent = verificationHealth(rotation, [use("STRIPE_SECRET", NOW - HOUR, NOW)], null, NOW);
    expect(recent.secrets[1]!.advice).toBe("not-seen-yet");
    expect(recent.warnings).toEqual([]);
    const watched = verificationHealth(rotation, [use("STRIPE_SECRET", NOW - 4 * 24 * HOUR, NOW)], null, NOW);
    expect(watched.secrets[1]!.advice).toBe("safe-to-remove");
  });

  it("reads the counts from the METRICS dataset's delivery points, by the secret in blob5", async () => {
    const env = { METRICS: {}, METRICS_ACCOUNT_ID: "acct", METRICS_API_TOKEN: "token" };
    const asked: string[] = [];
    const fetcher = (async (_url: string, init: RequestInit) => {
      asked.push(String(init.body));
      return Response.json({
        data: [
          {
            disposition: "accepted",
            signature: "valid",
            secret: "STRIPE_SECRET_OLD",
            hour: "2026-12-05 11:00:00",
            deliveries: 3,
          },
          {
            disposition: "duplicate",
            signature: "valid",
            secret: "STRIPE_SECRET_OLD",
            hour: "2026-12-05 11:00:00",
            deliveries: 1,
          },
          {
            disposition: "rejected",
            signature: "signature-mismatch",
            secret: "",
            hour: "2026-12-05 11:00:00",
            deliveries: 2,
          },
        ],
      });
    }) as unknown as typeof fetch;
    const read = await outcomeCounts(env, "stripe", 24 * HOUR, fetcher);
    expect(asked).toEqual([`${outcomesSql("webhook_receiver_metrics", "stripe", 24)} FORMAT JSON`]);
    expect(read).toEqual({
      origin: "analytics-engine",
      counts: [
        { hour: Date.UTC(2026, 11, 5, 11), outcome: { kind: "verified", secret: "STRIPE_SECRET_OLD" }, deliveries: 4 },
        { hour: Date.UTC(2026, 11, 5, 11), outcome: { kind: "rejected", reason: "signature-mismatch" }, deliveries: 2 },
      ],
    });
  });
});
