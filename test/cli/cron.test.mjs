// The local scheduler's reading of cron expressions (scripts/lib/cron.mjs), against the schedules Cloudflare's
// [triggers] crons accept.
import assert from "node:assert/strict";
import { test } from "node:test";
import { parseCron, parseEvery } from "../../scripts/lib/cron.mjs";

const at = (/** @type {string} */ iso) => new Date(iso);

test("*/5 fires on every fifth minute and no other", () => {
  const matches = parseCron("*/5 * * * *");
  assert.equal(matches(at("2026-11-30T08:00:00Z")), true);
  assert.equal(matches(at("2026-11-30T08:55:00Z")), true);
  assert.equal(matches(at("2026-11-30T08:01:00Z")), false);
  assert.equal(matches(at("2026-11-30T08:59:00Z")), false);
});

test("ranges, lists, names and UTC: 30 9-17 * * MON-FRI", () => {
  const matches = parseCron("30 9-17 * * MON-FRI");
  assert.equal(matches(at("2026-11-30T09:30:00Z")), true, "a Monday");
  assert.equal(matches(at("2026-11-29T09:30:00Z")), false, "a Sunday");
  assert.equal(matches(at("2026-11-30T18:30:00Z")), false);
  assert.equal(parseCron("0 0 1,15 JAN *")(at("2027-01-15T00:00:00Z")), true);
  assert.equal(parseCron("0 0 * * 7")(at("2026-11-29T00:00:00Z")), true, "7 is Sunday too");
});

test("a malformed expression is refused with the field named", () => {
  assert.throws(() => parseCron("* * * *"), /five fields/);
  assert.throws(() => parseCron("61 * * * *"), /minute "61" is out of range/);
  assert.throws(() => parseCron("*/0 * * * *"), /step/);
});

test("--cron-every durations", () => {
  assert.equal(parseEvery("30s"), 30_000);
  assert.equal(parseEvery("2m"), 120_000);
  assert.equal(parseEvery("0s"), null);
  assert.equal(parseEvery("soon"), null);
});
