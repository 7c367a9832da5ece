import fc from "fast-check";
import { asanaSpec } from "../../../src/providers/asana";
import { notionSpec } from "../../../src/providers/notion";
import { oktaSpec } from "../../../src/providers/okta";
import { type PresetSpec, presets } from "../../../src/providers/presets";
import { secretValue, send, uniqueKey } from "../support/contract";
import { hmac, sha256Hex } from "../support/signers";
import { composed, type Delivery, type Sender, type Variant } from "./property";
import { jsonFieldsChanged, jsonReencoded, queryAdded, setAt, unsignedHeaders, urlTailIntoBody } from "./reencode";
import { signatureListRespelled } from "./senders-body";

/**
 * Every sender written as a preset (src/providers/presets.ts, and Okta, Asana, Notion and Dropbox built on it),
 * each signed from its spec's recipe with node:crypto. Where the MAC covers the body, the variants are header
 * ones; where the scheme is a shared token (Okta, Telegram, Postmark), whoever holds the token can send any bytes,
 * so only what keeps either the bytes or the key is a replay: a body re-encoded under its signed-or-not key is
 * quarantined by the key, headers changed over the same bytes are duplicates. A token sender keyed by the payload
 * hash (Postmark) turns any new bytes into a new event; docs/providers.md says so.
 */

const url = (source: string) => `https://receiver.test/webhooks/${source}`;

function keyBytes(spec: PresetSpec, secret: string): Buffer {
  if (spec.secretEncoding === "hex") return Buffer.from(secret, "hex");
  if (spec.secretEncoding === "base64") return Buffer.from(secret, "base64");
  return Buffer.from(secret, "utf8");
}

function timestampText(spec: PresetSpec, at: number): string {
  if (spec.timestampFormat === "unix-ms") return String(at);
  if (spec.timestampFormat === "rfc3339") return new Date(at).toISOString();
  return String(Math.floor(at / 1000));
}

/** A body holding the spec's key, type, subject and time where the spec reads them (an array when its paths say `0.`). */
function bodyFor(spec: PresetSpec, marker: string): string {
  const paths = [spec.eventKey?.path, spec.type?.path, spec.subjectPath, spec.occurredAtPath].filter(Boolean);
  const inArray = paths.some((path) => path!.startsWith("0."));
  const at = (path: string) => (inArray ? path.slice(2) : path);
  let document: unknown = { marker };
  if (spec.eventKey?.path) {
    const numeric = spec.eventKey.path === "update_id";
    document = setAt(
      document,
      at(spec.eventKey.path),
      numeric ? Number.parseInt(sha256Hex(marker).slice(0, 12), 16) : marker,
    );
  }
  if (spec.type?.path) document = setAt(document, at(spec.type.path), "thing.happened");
  if (spec.type?.otherKeyThan)
    document = {
      [spec.type.otherKeyThan]: (document as Record<string, unknown>)[spec.type.otherKeyThan],
      message: { marker },
    };
  if (spec.subjectPath) document = setAt(document, at(spec.subjectPath), `subject_${marker}`);
  if (spec.occurredAtPath) document = setAt(document, at(spec.occurredAtPath), new Date().toISOString());
  return JSON.stringify(inArray ? [document] : document);
}

function signed(spec: PresetSpec, called: string, signedUrl: string, secret: string, marker: string): Delivery {
  const body = bodyFor(spec, marker);
  const [signatureHeader] = typeof spec.signatureHeader === "string" ? [spec.signatureHeader] : spec.signatureHeader;
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (spec.eventKey?.header) headers[spec.eventKey.header] = crypto.randomUUID();
  if (spec.type?.header) headers[spec.type.header] = "thing.happened";
  for (const name of spec.annotations ?? []) headers[name] = "1";
  if (spec.algorithm === "token") {
    headers[signatureHeader!] = spec.basicAuth ? `Basic ${Buffer.from(secret).toString("base64")}` : secret;
    return { url: called, body, headers };
  }
  const time = timestampText(spec, Date.now());
  const parts = spec.signs.map((part) => {
    if (part === "body") return body;
    if (part === "timestamp") return time;
    if (part === "method") return "POST";
    if (part === "url") return signedUrl;
    return part.literal;
  });
  const algorithm = spec.algorithm.replace("hmac-", "") as "sha1" | "sha256" | "sha512";
  const mac = `${spec.prefix ?? ""}${hmac(algorithm, keyBytes(spec, secret), ...parts).toString(spec.encoding === "hex" ? "hex" : "base64")}`;
  if (spec.list) {
    const { entries, pair } = spec.list;
    const signature = `${spec.list.signature}${pair}${mac}`;
    headers[signatureHeader!] = spec.list.timestamp
      ? `${spec.list.timestamp}${pair}${time}${entries}${signature}`
      : signature;
  } else {
    headers[signatureHeader!] = mac;
  }
  if (spec.timestampHeader) headers[spec.timestampHeader] = time;
  return { url: called, body, headers };
}

function variantsFor(spec: PresetSpec, called: string): fc.Arbitrary<Variant> {
  const signatureHeaders =
    typeof spec.signatureHeader === "string" ? [spec.signatureHeader] : [...spec.signatureHeader];
  const signedHeaders = new Set([...signatureHeaders, spec.timestampHeader].filter(Boolean));
  const unsigned = [...spec.keptHeaders, ...(spec.annotations ?? []), spec.eventKey?.header, spec.type?.header].filter(
    (name): name is string => Boolean(name) && !signedHeaders.has(name!),
  );
  const atoms: fc.Arbitrary<Variant>[] = [unsignedHeaders([...unsigned, ...signatureHeaders.slice(1)])];
  if (spec.list) {
    const junk = `${spec.list.signature}${spec.list.pair}${spec.encoding === "hex" ? "ab".repeat(32) : "AAAA"}`;
    atoms.push(signatureListRespelled(signatureHeaders[0]!, spec.list.entries, junk));
  }
  // Where the URL signed is the source's public_url, the URL called may change: its query, its last character.
  if (spec.signs.includes("url") && called.includes("?")) atoms.push(queryAdded, urlTailIntoBody);
  // A token signs no byte of the body: only a key read from the body keeps a re-encoded copy the same event.
  if (spec.algorithm === "token" && spec.eventKey?.path) {
    atoms.push(jsonReencoded, jsonFieldsChanged(spec.type?.otherKeyThan ? ["message.text"] : ["marker", "extra.note"]));
  }
  return composed(fc.oneof(...atoms));
}

export function presetSender(
  spec: PresetSpec,
  options: { source?: string; called?: string; publicUrl?: string; secret?: () => string } = {},
): Sender {
  const source = options.source ?? `pv-${spec.provider}`;
  const called = options.called ?? url(source);
  const secret = () => options.secret?.() ?? secretValue(spec.provider, "CURRENT");
  return {
    provider: spec.provider,
    source,
    deliver: (marker) => signed(spec, called, options.publicUrl ?? called, secret(), marker),
    variants: variantsFor(spec, called),
  };
}

/**
 * Asana and Notion verify with a secret handed over in a proven handshake: the run makes one, with a fresh secret,
 * through the route, and signs with it.
 */
function keptSecretSender(
  spec: PresetSpec,
  source: string,
  handshake: (secret: string, verifyToken: string) => Delivery,
): Sender {
  let kept = "";
  const sender = presetSender(spec, { source, secret: () => kept });
  return {
    ...sender,
    async setup() {
      kept = uniqueKey(`${spec.provider}_secret`);
      const verifyToken = secretValue(spec.provider, "VERIFY_TOKEN" as never);
      const answer = await send(sender.source, handshake(kept, verifyToken));
      if (answer.status !== 200) throw new Error(`the ${spec.provider} handshake was refused: ${answer.status}`);
      await answer.body?.cancel();
    },
  };
}

export const presetSenders: readonly Sender[] = [
  ...presets.map((spec) => presetSender(spec)),
  // HubSpot behind a proxy: its public_url is what is signed, the URL called carries a query the route ignores.
  presetSender(presets.find((spec) => spec.provider === "hubspot")!, {
    source: "pv-hubspot-proxied",
    called: `${url("pv-hubspot-proxied")}?portal=7`,
    publicUrl: "https://hooks.example.com/crm/hubspot?portal=7",
    secret: () => secretValue("hubspot", "CURRENT"),
  }),
  presetSender(oktaSpec),
  // Sources of their own: the secret a handshake keeps is the source's, so handshakes.test.ts must not share them.
  keptSecretSender(asanaSpec, "pv-asana-variants", (secret, verifyToken) => ({
    url: `${url("pv-asana-variants")}?verify_token=${verifyToken}`,
    body: "",
    headers: { "x-hook-secret": secret },
  })),
  keptSecretSender(notionSpec, "pv-notion-variants", (secret, verifyToken) => ({
    url: `${url("pv-notion-variants")}?verify_token=${verifyToken}`,
    body: JSON.stringify({ verification_token: secret }),
    headers: { "content-type": "application/json" },
  })),
];
