#!/usr/bin/env node
// The receiver's command line for the local loop: send signed samples, follow and inspect receipts, replay,
// check the config and secrets, and stand in for a forward destination. `npm run cli -- <command>`.
import { Command, CommanderError } from "commander";
import { CliError, EXIT } from "./errors.mjs";
import { firstLine } from "./project.mjs";

const [major, minor] = process.versions.node.split(".").map(Number);
if (major < 22 || (major === 22 && minor < 12)) {
  console.error(`error: Node ${process.versions.node} is too old: the receiver's tools need Node >= 22.12`);
  process.exit(1);
}

/** Runs a command module lazily, so `receiver secret` does not load wrangler or the provider SDKs. */
const run =
  (/** @type {() => Promise<Record<string, unknown>>} */ load, /** @type {string} */ name) =>
  async (/** @type {unknown[]} */ ...args) => {
    const command = /** @type {Command} */ (args.at(-1));
    const options = { ...program.opts(), ...command.opts() };
    const positional = args.slice(0, -2);
    const handler = /** @type {(...args: unknown[]) => Promise<number>} */ ((await load())[name]);
    process.exitCode = await handler(...positional, options);
  };

const program = new Command("receiver")
  .description("Local tools for the edge webhook receiver")
  .option("--url <url>", "the receiver's base URL (default: RECEIVER_URL, else http://127.0.0.1:8787)")
  .option("--config <path>", "wrangler config to read sources from (default: RECEIVER_CONFIG, else wrangler.toml)")
  .option("--dev-vars <path>", "local secrets file (default: RECEIVER_DEV_VARS, else .dev.vars)")
  .option("-e, --env <name>", "a wrangler environment, e.g. production")
  .option("--debug", "print the stack trace of an unexpected failure")
  .showHelpAfterError("(add --help for usage)")
  .exitOverride();

program
  .command("send")
  .description("sign a sample (or a file) with the source's provider scheme and secret, post it, print the answer")
  .argument("<source>", "a source from [vars.SOURCES]")
  .argument(
    "[sample-or-file]",
    "a bundled sample name (examples/samples/*.json, credit, plan-changed) or a file; default: the provider's sample",
  )
  .option("--id <id>", "the event id to send (the dedupe key); default: a fresh one")
  .option("-H, --header <name:value...>", "add or override a request header")
  .action(run(() => import("./commands/send.mjs"), "send"));

program
  .command("tail")
  .description("follow receipts and attempts as they happen (admin API)")
  .option("-s, --source <source>", "only this source")
  .option("--status <list>", "only these statuses, comma-separated: pending,processing,processed,stale,dead,skipped")
  .option("--history <n>", "receipts from before to show first", "10")
  .option("--interval <ms>", "how often to look, in milliseconds", "1000")
  .option("--page <n>", "how many of the newest receipts each look reads (1-200)", "50")
  .option(
    "--window <duration>",
    "also follow changes to receipts received this far back (e.g. 1h, 24h, at most 7d)",
    "6h",
  )
  .action(run(() => import("./commands/tail.mjs"), "tail"));

program
  .command("show")
  .description("a receipt, its timeline and outcome: show <receipt-id> or show <source> <event-key>")
  .argument("<receipt-or-source>")
  .argument("[event-key]")
  .option("--body", "print the stored body too")
  .option("--json", "the admin API's JSON as is")
  .action(run(() => import("./commands/show.mjs"), "show"));

program
  .command("replay")
  .description(
    "replay one finished receipt, or by filter as one job: replay <receipt-id> [--route R] | replay --source S [--route R] [--status dead|skipped|processed] [--type T] [--since T] [--until T] [--error TEXT] [--dry-run] | replay --job KEY",
  )
  .argument("[receipt-id]")
  .option("--dead", "replay dead letters matching the filters, page by page (without a job)")
  .option("-s, --source <source>", "replay by filter: the source (required)")
  .option("--status <status>", "with --source: replay deliveries in this status: dead (default), skipped, processed")
  .option("--error <text>", "with --source: only deliveries whose last error contains this text")
  .option("--dry-run", "with --source: print how many would be replayed, and a sample, and replay nothing")
  .option("--job <key>", "a replay job's progress (the key `replay --source` printed)")
  .option("--since <time>", "by filter: received at or after (ISO 8601 or epoch ms)")
  .option("--until <time>", "by filter: received before")
  .option("--type <type>", "by filter: only this event type")
  .option("--route <route>", "only that route's delivery (of the receipt, or by filter of every receipt)")
  .option("--json", "print the API's answer as JSON")
  .action(run(() => import("./commands/replay.mjs"), "replay"));

for (const [action, description] of [
  [
    "dismiss",
    "take dead letters out of the dead letters (kept and shown, never replayed in bulk): dismiss <receipt-id...> [--route R]",
  ],
  ["restore", "put dismissed receipts back among the dead letters, replayable: restore <receipt-id...> [--route R]"],
]) {
  program
    .command(action)
    .description(description)
    .argument("<receipt-id...>")
    .option("--route <route>", "that route's delivery of each receipt instead of the receipt itself")
    .option("--json", "print the API's answer as JSON")
    .action(run(() => import("./commands/dismiss.mjs"), action));
}

program
  .command("sql")
  .description(
    'run one read-only SQL statement over every receipt database, with the rows one database holding them all would give: sql "<query>" [--source S] [--since T]',
  )
  .argument(
    "<query>",
    "one SQL statement (SELECT or WITH … SELECT) over receipts, deliveries, attempts, replays, quarantine",
  )
  .option("-s, --source <source>", "copy only this source's rows")
  .option(
    "--since <time>",
    "only receipts received at or after: ISO 8601, epoch ms, or a duration back from now (24h, 7d)",
  )
  .option("--until <time>", "only receipts received before (same forms)")
  .option("--max-rows <n>", "refuse to copy more rows than this (narrow --since/--source instead)", "200000")
  .option("--json", "print the rows as a JSON array")
  .action(run(() => import("./commands/sql.mjs"), "sql"));

program
  .command("check")
  .description(
    "validate the sources config as the Worker does, that every secret it names is set, and (for a source listing several) which still verify",
  )
  .option("--remote", "look for the secrets on the deployed Worker (wrangler secret list) instead of .dev.vars")
  .option("--config-only", "validate the config only, without looking for secrets")
  .action(run(() => import("./commands/check.mjs"), "check"));

program
  .command("capacity")
  .description(
    "what a sustained rate needs of the claim shards, D1 and R2, each store against its published limit, the binding limit and the monthly cost, from the bench's measured per-event figures",
  )
  .option("--rate <events/s>", "sustained events a second of one source")
  .option("--body-bytes <bytes>", "a typical body's size")
  .option("--key-retention <duration>", "how long keys are kept (dedupe_retention)", "35d")
  .option("--payload-retention <duration>", "how long bodies are kept (payload_retention)", "7d")
  .option(
    "--sql-window <duration>",
    "how long receipts stay in D1 before the R2 archive (default: the key retention, no archive)",
  )
  .option(
    "--archive-retention <duration>",
    "with --sql-window: how long the archive keeps a receipt (default: the key retention)",
  )
  .option("--bodies <where>", "r2 (segments in a BODIES bucket) or d1 (no bucket: bodies in the receipt row)", "r2")
  .option("--shards <n>", "hold the rate against this CLAIM_SHARD_COUNT (default: as many as it needs)")
  .option("--databases <n>", "with --sql-window: hold the rate against this many partition databases")
  .option(
    "--spread <n>",
    "with --sql-window: databases each period's receipts are written to side by side (RECEIPT_PARTITIONS.spread; default 1)",
  )
  .option("--figures <file>", "the per-event figures (default: bench/results/per-event.json)")
  .option("--json", "print the model's report as JSON")
  .action(run(() => import("./commands/capacity.mjs"), "capacity"));

program
  .command("route")
  .description(
    "route test <source> [sample-or-file]: whether each of the source's routes takes the sample, its schema's verdict and its transform's output; route test <source> --last N [--config draft.toml]: the receiver's newest N stored events through the routes now or as in a draft, counted per route, with the changed outputs; both send and write nothing | route pause|resume|status <source> <route>: hold a route's deliveries, send them on in received order, or show its gate (paused, circuit breaker)",
  )
  .argument("<action>", "test | pause | resume | status")
  .argument("<source>", "a source from [vars.SOURCES]")
  .argument(
    "[sample-or-file-or-route]",
    "test: a bundled sample name or a file, as for send (default: the provider's sample); pause, resume, status: the route's name",
  )
  .option("--route <route>", "test: only this route (default: every route of the source)")
  .option(
    "--last <n>",
    "test: the receiver's newest n stored events (at most 1000) instead of a sample; with --config, as that config's routes would take them",
  )
  .option("--json", "print the result as JSON")
  .action(run(() => import("./commands/route.mjs"), "route"));

program
  .command("kept")
  .description(
    "the secrets asana and notion sources keep from their handshakes: kept list <source> | kept approve|revoke <source> <fingerprint>",
  )
  .argument("<action>", "list | approve | revoke")
  .argument("<source>", "an asana or notion source")
  .argument("[fingerprint]", "for approve and revoke: the fingerprint kept list shows")
  .option("--json", "print the API's answer as JSON")
  .action(run(() => import("./commands/kept.mjs"), "kept"));

program
  .command("listen")
  .description(
    "a receiver's deliveries to a listen:<name> route, posted to your local server and answered with its status: listen <source> [--route R] --forward http://127.0.0.1:3000/hooks",
  )
  .argument("<source>", "a source with a route whose destination is listen:<name>")
  .option("--route <route>", "which listen: route, when the source has several")
  .option("--forward <url>", "your local server, where each delivery is posted")
  .action(run(() => import("./commands/listen.mjs"), "listen"));

program
  .command("audit-log")
  .description("the operator audit log, newest first: who replayed, dismissed, paused, approved …, allowed or refused")
  .option("--actor <name>", "only this actor: an Access email, service:<client id>, or admin-token")
  .option(
    "--action <action>",
    "only this action: replay, bulk-replay, dismiss, restore, pause, resume, acknowledge, resolve, approve, revoke",
  )
  .option("--outcome <outcome>", "only allowed or refused ones")
  .option("--limit <n>", "how many (1-200, default 50)")
  .option("--before <cursor>", "older than this: the cursor the previous page printed")
  .option("--json", "print the API's answer as JSON")
  .action(run(() => import("./commands/audit-log.mjs"), "auditLog"));

program
  .command("issues")
  .description(
    "what the receiver found wrong: issues [--all] lists them (and each notice channel) | issues ack <key> --note <text> | issues resolve <key> [--note <text>]",
  )
  .argument("[action]", "list (default) | ack | resolve")
  .argument("[key]", "for ack and resolve: the issue's key, as issues lists it")
  .option("--all", "list resolved issues too")
  .option("--note <text>", "ack: what is being done about it (required); resolve: why (optional)")
  .option("--json", "print the API's answer as JSON")
  .action(run(() => import("./commands/issues.mjs"), "issues"));

program
  .command("echo")
  .description("a local backend for forward destinations: prints each delivery and verifies its gateway signature")
  .option("-p, --port <port>", "port to listen on", "8789")
  .option("--host <host>", "address to listen on", "127.0.0.1")
  .option("--status <code>", "answer every delivery with this status (e.g. 503, to watch retries)")
  .action(run(() => import("./commands/echo.mjs"), "echo"));

program
  .command("secret")
  .description("generate a secret: gateway (whsec_…), token (admin token), or a key pair: ed25519|whpk|p256 <NAME>")
  .argument("<kind>", "gateway | token | whsec | ed25519 | whpk | p256")
  .argument("[name]", "for key pairs: the secret name the source lists")
  .action(async (kind, name) => {
    process.exitCode = (await import("./commands/secret.mjs")).secret(kind, name);
  });

try {
  await program.parseAsync(process.argv);
} catch (error) {
  if (error instanceof CommanderError) {
    // Commander has already printed the usage problem (or the help/version it was asked for).
    process.exitCode = error.exitCode === 0 ? 0 : EXIT.usage;
  } else if (error instanceof CliError) {
    console.error(`error: ${error.message}`);
    process.exitCode = error.exitCode;
  } else {
    console.error(`error: ${firstLine(error)} (an unexpected failure: rerun with --debug for details)`);
    if (program.opts().debug) console.error(error);
    process.exitCode = 1;
  }
}
