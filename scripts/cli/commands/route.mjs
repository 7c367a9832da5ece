// `route test <source> [sample-or-file]`: what each of the source's routes would do with an event — whether its
// filter matches, its schema's verdict, its transform's output — run by the Worker's own code. Sends and writes
// nothing. With `--last N`, the receiver's stored events instead (./route-last.mjs).
import { CliError, EXIT } from "../errors.mjs";
import { devVarsPath, readDevVars } from "../project.mjs";
import { freshEventKey, loadSample } from "../samples.mjs";
import { schemeFor } from "../signers.mjs";
import { validSource } from "../valid-source.mjs";
import { signingSecret } from "./send.mjs";

/**
 * The event's identity (type, subject) is what the source's provider adapter reads from a verified delivery, so the
 * sample is signed as `send` signs it (with the local secret) and verified in-process, exactly as the route would.
 * @param {string} action
 * @param {string} sourceName
 * @param {string | undefined} sampleOrFile
 * @param {{ json?: boolean, route?: string, last?: string } & import("../project.mjs").ProjectOptions} options
 */
export async function route(action, sourceName, sampleOrFile, options) {
  if (action === "pause" || action === "resume" || action === "status") {
    const { routeControl } = await import("./route-control.mjs");
    return routeControl(action, sourceName, sampleOrFile, options);
  }
  if (action !== "test")
    throw new CliError(
      `unknown route action ${JSON.stringify(action)}: use route test <source> [sample-or-file], or route pause|resume|status <source> <route>`,
    );
  if (options.last !== undefined) {
    if (sampleOrFile !== undefined)
      throw new CliError(
        `route test --last runs the stored events, not a sample: drop ${JSON.stringify(sampleOrFile)} or --last`,
        EXIT.usage,
      );
    const { routeTestLast } = await import("./route-last.mjs");
    return routeTestLast(sourceName, options);
  }
  const { table, source, worker } = await validSource(options, sourceName);
  const routes = source.routes.filter(
    (/** @type {{ rules: { name: string } }} */ { rules }) =>
      options.route === undefined || rules.name === options.route,
  );
  if (routes.length === 0)
    throw new CliError(
      `source ${sourceName} has no route ${JSON.stringify(options.route)}: its routes are ${source.routes.map((/** @type {{ rules: { name: string } }} */ { rules }) => rules.name).join(", ")}`,
      EXIT.notFound,
    );
  const provider = String(table.provider);
  const vars = readDevVars(options);
  const secret = signingSecret(sourceName, table, vars, devVarsPath(options));
  const { payload, from } = loadSample(provider, sampleOrFile);
  const url = `http://127.0.0.1/webhooks/${encodeURIComponent(sourceName)}`;
  const signed = await (await schemeFor(provider, table)).sign({
    payload,
    eventKey: freshEventKey(provider),
    secret: secret.value,
    secretName: secret.name,
    privateKey: () => {
      const privateKey = vars[`${secret.name}_PRIVATE_KEY`];
      if (!privateKey)
        throw new CliError(
          `${provider} signs with a private key: add ${secret.name}_PRIVATE_KEY to ${devVarsPath(options)}`,
        );
      return privateKey;
    },
    url,
    options: table,
    now: new Date(),
  });
  const rawBody = typeof signed.body === "string" ? new TextEncoder().encode(signed.body) : new Uint8Array(signed.body);
  const headers = new Headers(signed.headers);
  const adapter = worker.adapterFor(provider);
  // Such a sender signs with a secret it handed over in a handshake, which only the running receiver keeps.
  if (adapter.keptSecrets)
    throw new CliError(
      `${provider} signs with a secret kept from its handshake, which only the running receiver has: route test cannot verify its samples locally`,
    );
  const verdict = await adapter.verify({
    source: sourceName,
    method: "POST",
    rawBody,
    headers,
    url,
    secrets: [{ name: secret.name, value: secret.value }],
    now: Date.now(),
    options: table,
  });
  if (verdict.kind !== "event")
    throw new CliError(
      `the ${provider} adapter did not take the signed sample as an event (${verdict.kind}${verdict.reason ? `: ${verdict.reason}` : ""}); is it a ${provider} event?`,
    );
  const { eventType, subjectId } = verdict.identity;
  // What the receipt would store (an adapter may keep other bytes than it received: Graph's clientState is dropped).
  const storedBody = verdict.storedBody ?? rawBody;
  const keptHeaders = JSON.stringify(worker.pickHeaders(headers, adapter.keptHeaders));
  const event = { body: storedBody, keptHeaders, eventType, subjectId };
  const explained = [];
  for (const { rules, destination } of routes)
    explained.push({ destination, ...(await worker.explainRoute(rules, event)) });
  if (options.json) {
    console.log(
      JSON.stringify(
        { source: sourceName, sample: from, type: eventType, subject: subjectId, routes: explained },
        null,
        2,
      ),
    );
    return 0;
  }
  console.log(
    `source ${sourceName} · sample ${from} · type ${eventType ?? "(none)"} · subject ${subjectId ?? "(none)"}`,
  );
  for (const explanation of explained) printExplanation(explanation);
  console.log("nothing was sent or written");
  return 0;
}

/** One route's block: its filter's, schema's and transform's results, and what the consumer would do. */
function printExplanation(/** @type {any} */ explanation) {
  const { destination } = explanation;
  console.log(`route ${explanation.name} → ${describeDestination(destination)}`);
  console.log(
    `  filter     ${explanation.filterMatches === null ? "none (takes every event)" : explanation.filterMatches ? "matches" : "does not match"}`,
  );
  const schema = explanation.schema;
  console.log(`  schema     ${schema === null ? "none" : schema.ok ? "passes" : `fails: ${schema.errors.join("; ")}`}`);
  const transform = explanation.transform;
  console.log(
    `  transform  ${transform === null ? "none (the original bytes are sent)" : transform.ok ? JSON.stringify(transform.output, null, 2).replace(/\n/g, "\n             ") : transform.error}`,
  );
  const sentHeaders = explanation.verdict.kind === "deliver" ? explanation.verdict.headers : null;
  if (sentHeaders)
    console.log(
      `  headers    ${
        Object.entries(sentHeaders)
          .map(([name, value]) => `${name}: ${value}`)
          .join("\n             ") || "(none for this event)"
      }`,
    );
  console.log(`  verdict    ${describeVerdict(explanation.verdict, destination)}`);
}

function describeDestination(
  /** @type {{ kind: string, handlerName?: string, url?: string, listenName?: string }} */ destination,
) {
  if (destination.kind === "handler") return `handler:${destination.handlerName}`;
  if (destination.kind === "forward") return destination.url;
  if (destination.kind === "listen") return `listen:${destination.listenName}`;
  return "none";
}

function describeVerdict(
  /** @type {{ kind: string, reason?: string, error?: string, transformed?: unknown }} */ verdict,
  /** @type {{ kind: string }} */ destination,
) {
  if (destination.kind === "none") return "skipped: the route has no destination";
  if (verdict.kind === "skip") return `skipped (${verdict.reason})`;
  if (verdict.kind === "refuse") return `dead-lettered: ${verdict.error}`;
  const what = verdict.transformed ? "the transform's output" : "the original bytes";
  if (destination.kind === "listen") return `sent to whoever runs listen: ${what}`;
  return destination.kind === "forward"
    ? `forwarded: ${what}`
    : `handed to the handler: ${verdict.transformed ? "the transform's output as its payload" : "the event as received"}`;
}
