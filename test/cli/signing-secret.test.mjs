// `send` and `route` sign with the first listed secret that is unexpired and set locally; when there is none, the
// error says which of the three reasons it is (issue 37: a table with `secret = [...]` was told it "lists (none)").
import assert from "node:assert/strict";
import { test } from "node:test";
import { signingSecret } from "../../scripts/cli/commands/send.mjs";

/** The message `send` stops with for `source` when nothing is set locally. */
function refusal(/** @type {Record<string, unknown>} */ source) {
  try {
    signingSecret("demo", source, {}, ".dev.vars");
  } catch (error) {
    return /** @type {Error} */ (error).message;
  }
  assert.fail("signingSecret found a secret to sign with");
}

test("a source listing no secrets is told to list one, not that '(none)' is unset", () => {
  const message = refusal({ provider: "stripe", secret: ["STRIPE_SECRET"] });
  assert.equal(
    message,
    'source demo lists no secrets: give its table secrets = ["<NAME>"] (npm run cli -- check names what else is wrong with it)',
  );
});

test("secrets all past their expires are named as expired; unset usable ones by name, expired ones left out", () => {
  const expired = { name: "OLD", expires: "2000-01-01T00:00:00Z" };
  assert.equal(refusal({ secrets: [expired] }), "source demo lists OLD, all past their expires: list a fresh secret");
  assert.equal(
    refusal({ secrets: [expired, "NEW"] }),
    'source demo lists NEW but none is set in .dev.vars: add NEW="…" there, then restart npm start',
  );
  assert.deepEqual(signingSecret("demo", { secrets: [expired, "NEW"] }, { NEW: "v" }, ".dev.vars"), {
    name: "NEW",
    value: "v",
  });
});
