#!/usr/bin/env node
// `npm run send -- <source> <file.json> [webhook-id]`: signs a sample event with the source's secret from
// .dev.vars (Standard Webhooks scheme) and posts it to the local receiver.
import { readFileSync } from "node:fs";
import { standardWebhookHeaders } from "./lib/signed-delivery.mjs";

const [source = "demo", file = "examples/credit.json", webhookId = `msg_${Date.now().toString(36)}`] = process.argv.slice(2);
const secretName = process.env.SECRET_NAME ?? `${source.toUpperCase().replace(/-/g, "_")}_WEBHOOK_SECRET`;
const vars = Object.fromEntries(
  readFileSync(".dev.vars", "utf8")
    .split("\n")
    .map((line) => /^([A-Z0-9_]+)\s*=\s*"?(.*?)"?\s*$/.exec(line))
    .filter(Boolean)
    .map((match) => [match[1], match[2]]),
);
const secret = vars[secretName];
if (!secret) {
  console.error(`No ${secretName} in .dev.vars (set SECRET_NAME to choose another).`);
  process.exit(1);
}
const body = readFileSync(file, "utf8");
const url = `${process.env.RECEIVER_URL ?? "http://127.0.0.1:8787"}/webhooks/${source}`;
const response = await fetch(url, {
  method: "POST",
  body,
  headers: standardWebhookHeaders(secret, webhookId, body),
});
console.log(`${response.status} ${await response.text()}`);
process.exit(response.ok ? 0 : 1);
