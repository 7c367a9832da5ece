// `send <source> [sample-or-file] [--id ID]`: sign a sample the way the source's provider signs and post it.
import { CliError, EXIT } from "../errors.mjs";
import { freshSample } from "../fresh-sample.mjs";
import { postWebhook } from "../http.mjs";
import { devVarsPath, readDevVars, readSources, receiverUrl } from "../project.mjs";
import { freshEventKey, loadSample } from "../samples.mjs";
import { payloadHash, schemeFor } from "../signers.mjs";

/**
 * Why no listed secret can sign: the source lists none (its table is broken: `check` says how), every one it lists
 * is past its expires, or none of the usable ones is set locally.
 * @param {string} sourceName
 * @param {{ name: string, expires?: string }[]} names
 * @param {{ name: string, expires?: string }[]} usable
 * @param {string} varsPath
 */
function noSigningSecret(sourceName, names, usable, varsPath) {
  if (names.length === 0)
    return `source ${sourceName} lists no secrets: give its table secrets = ["<NAME>"] (npm run cli -- check names what else is wrong with it)`;
  if (usable.length === 0)
    return `source ${sourceName} lists ${names.map((ref) => ref.name).join(", ")}, all past their expires: list a fresh secret`;
  return `source ${sourceName} lists ${usable.map((ref) => ref.name).join(", ")} but none is set in ${varsPath}: add ${usable[0]?.name}="…" there, then restart npm start`;
}

/**
 * The first listed secret that is both unexpired and present locally: the one a real sender would sign with.
 * @param {string} sourceName
 * @param {Record<string, unknown>} source
 * @param {Record<string, string>} vars
 * @param {string} varsPath
 */
export function signingSecret(sourceName, source, vars, varsPath) {
  const refs = Array.isArray(source.secrets) ? source.secrets : [];
  const names = refs.map((ref) =>
    typeof ref === "string"
      ? { name: ref, expires: undefined }
      : /** @type {{ name: string, expires?: string }} */ (ref),
  );
  const usable = names.filter((ref) => !ref.expires || Date.parse(ref.expires) > Date.now());
  const found = usable.find((ref) => vars[ref.name]);
  if (!found) throw new CliError(noSigningSecret(sourceName, names, usable, varsPath), EXIT.setup);
  return { name: found.name, value: vars[found.name] };
}

/**
 * @param {string} sourceName
 * @param {string | undefined} sampleOrFile
 * @param {{ id?: string, header?: string[] } & import("../project.mjs").ProjectOptions} options
 */
export async function send(sourceName, sampleOrFile, options) {
  const sources = await readSources(options);
  const source = sources[sourceName];
  if (!source)
    throw new CliError(
      `no source ${sourceName} in the config: sources are ${Object.keys(sources).join(", ")}`,
      EXIT.notFound,
    );
  const provider = String(source.provider);
  const scheme = await schemeFor(provider, source);
  const vars = readDevVars(options);
  const secret = signingSecret(sourceName, source, vars, devVarsPath(options));
  const sample = loadSample(provider, sampleOrFile).payload;
  const eventKey = options.id ?? freshEventKey(provider);
  const now = new Date();
  // A made-up key makes a new event; a given --id resends the same one, so the sample goes out as it is.
  const payload = options.id === undefined ? freshSample(provider, sample, { eventKey, now }) : sample;
  const url = `${receiverUrl(options)}/webhooks/${encodeURIComponent(sourceName)}`;
  const request = await scheme.sign({
    payload,
    eventKey,
    secret: secret.value,
    secretName: secret.name,
    privateKey: () => {
      // Asymmetric schemes list the sender's public key; signing locally needs its private half next to it.
      const privateKey = vars[`${secret.name}_PRIVATE_KEY`];
      if (!privateKey) {
        throw new CliError(
          `${provider} signs with a private key: add ${secret.name}_PRIVATE_KEY to ${devVarsPath(options)} (npm run cli -- secret ${provider === "sendgrid" ? "p256" : secret.value.startsWith("whpk_") ? "whpk" : "ed25519"} ${secret.name} prints a pair)`,
          EXIT.setup,
        );
      }
      return privateKey;
    },
    url,
    options: source,
    now,
  });
  for (const header of options.header ?? []) {
    const at = header.indexOf(":");
    if (at <= 0) throw new CliError(`--header ${JSON.stringify(header)} is not name:value`, EXIT.usage);
    request.headers[header.slice(0, at).trim().toLowerCase()] = header.slice(at + 1).trim();
  }
  const response = await postWebhook(url, request);
  console.log(`${response.status} ${response.text}`);
  const recordedKey = request.eventKey ?? (scheme.keyIn === "payload-hash" ? payloadHash(request.body) : eventKey);
  const keyNote =
    scheme.keyIn === "payload-hash"
      ? `event key ${recordedKey} (${provider} sends no id: the key is the payload's SHA-256)`
      : `event key ${recordedKey}`;
  // Microsoft Graph is answered 202, as it asks; every other sender 200.
  if (response.status === 200 || response.status === 202) {
    const duplicates = answersOf(response)
      .filter((answer) => answer.status === "duplicate")
      .map((answer) => answer.receipt);
    // A duplicate stores nothing: the key above names no receipt, the first delivery's receipt is the one to follow.
    if (duplicates.length > 0) {
      for (const receipt of duplicates)
        console.log(
          `duplicate of receipt ${receipt}: the receiver already holds this event (the same event key, or the same signed content where ${provider}'s signature does not cover its id) and stored nothing new · follow it: npm run cli -- show ${receipt}`,
        );
      return 0;
    }
    console.log(`${keyNote} · follow it: npm run cli -- show ${sourceName} ${recordedKey}`);
    return 0;
  }
  console.error(
    response.status === 401 && request.keptFingerprint
      ? `the receiver refused the delivery signed with the secret send handed over (${request.keptFingerprint}): ${sourceName} already keeps another one from an earlier handshake, so this one waits as pending: npm run cli -- kept approve ${sourceName} ${request.keptFingerprint}`
      : adviceFor(response.status, sourceName, secret.name),
  );
  return 1;
}

/**
 * Each event's disposition and receipt, from the receiver's own answer ({status, receipt}, or {events: […]} for a
 * batch) or, where the sender is answered in its own format (Twilio, Discord, Adyen, Graph), from the
 * x-webhook-disposition and x-webhook-receipt headers (src/ingest/acknowledge.ts).
 * @param {{ text: string, headers: Headers }} response
 * @returns {{ status: string, receipt: string }[]}
 */
export function answersOf(response) {
  try {
    const answer = JSON.parse(response.text);
    const listed = Array.isArray(answer?.events) ? answer.events : [answer];
    if (
      listed.every(
        (/** @type {any} */ entry) => typeof entry?.status === "string" && typeof entry?.receipt === "string",
      )
    )
      return listed;
  } catch {
    // Not the receiver's JSON: the headers below say the same.
  }
  const split = (/** @type {string} */ name) =>
    (response.headers.get(name) ?? "").split(",").map((part) => part.trim());
  const receipts = split("x-webhook-receipt");
  return split("x-webhook-disposition")
    .map((status, index) => ({ status, receipt: receipts[index] ?? "" }))
    .filter((answer) => answer.status && answer.receipt);
}

/** What to do about a refusal, in one line. */
function adviceFor(/** @type {number} */ status, /** @type {string} */ sourceName, /** @type {string} */ secretName) {
  switch (status) {
    case 401:
      return `the receiver refused the signature: is ${secretName} in .dev.vars the value the running receiver loaded? Restart npm start after editing it`;
    case 404:
      return `the running receiver has no source ${sourceName}: restart npm start after editing wrangler.toml`;
    case 413:
      return "the payload is over the source's max_body_bytes";
    case 503:
      return "the receiver cannot accept for this source right now (see the message above): fix the config or secrets it names, then restart npm start";
    default:
      return `the receiver answered ${status}`;
  }
}
