import { concatBytes, decodeBase64, decodeHex, utf8Bytes } from "../crypto/encoding";
import type { SignatureAlgorithm, VerificationKey } from "../crypto/verify";
import { parseJsonBody, stringAtPath } from "./json";
import {
  boundedEntries,
  describePayload,
  event,
  eventKeyOf,
  optionString,
  parseUnixSeconds,
  presentedSignatures,
  readHeader,
  type SignatureEncoding,
  signedAdapter,
} from "./signed";
import type { DeliveryInput, ProviderOptions } from "./types";

/**
 * A sender described entirely in wrangler.toml: which header holds the signature, the algorithm and encoding,
 * an optional prefix, the signed-content template (`{id}.{timestamp}.{body}`), the timestamp header and tolerance,
 * and where the dedupe key lives (a header or a JSON path; neither means the payload hash).
 */

const ALGORITHMS: readonly SignatureAlgorithm[] = ["hmac-sha1", "hmac-sha256", "hmac-sha512", "ed25519"];
const ENCODINGS: readonly SignatureEncoding[] = ["hex", "base64", "base64url"];
const SECRET_ENCODINGS = ["utf8", "base64", "hex"] as const;
const PLACEHOLDER = /\{([a-z_]+)\}/g;
const KNOWN_PLACEHOLDERS = new Set(["body", "timestamp", "id", "url"]);

interface GenericOptions {
  signatureHeader: string;
  algorithm: SignatureAlgorithm;
  encoding: SignatureEncoding;
  prefix: string;
  separator: string | undefined;
  template: string;
  idHeader: string | undefined;
  timestampHeader: string | undefined;
  timestampInMilliseconds: boolean;
  secretEncoding: (typeof SECRET_ENCODINGS)[number];
}

function settings(options: ProviderOptions): GenericOptions {
  return {
    signatureHeader: optionString(options, "signature_header") ?? "",
    algorithm: (optionString(options, "algorithm") ?? "hmac-sha256") as SignatureAlgorithm,
    encoding: (optionString(options, "encoding") ?? "hex") as SignatureEncoding,
    prefix: optionString(options, "signature_prefix") ?? "",
    separator: optionString(options, "signature_separator"),
    template: optionString(options, "signed_content") ?? "{body}",
    idHeader: optionString(options, "id_header"),
    timestampHeader: optionString(options, "timestamp_header"),
    timestampInMilliseconds: options.timestamp_unit === "ms",
    secretEncoding: (optionString(options, "secret_encoding") ?? "utf8") as GenericOptions["secretEncoding"],
  };
}

/**
 * Placeholders written side by side whose boundary the signature does not fix: `{id}{body}` signs the same bytes
 * for id `ab` and body `c…` as for id `a` and body `bc…`. A timestamp beside the body is the one exception (Discord
 * and SendGrid sign timestamp ‖ body): moving a digit across multiplies or divides the time by ten, far outside any
 * tolerance.
 */
function ambiguousNeighbours(template: string): string[] {
  const pairs: string[] = [];
  let previousName = "";
  let previousEnd = -1;
  for (const match of template.matchAll(PLACEHOLDER)) {
    const name = match[1]!;
    const timestampBesideBody =
      new Set([previousName, name]).size === 2 &&
      [previousName, name].every((each) => each === "timestamp" || each === "body");
    if (previousEnd === match.index && !timestampBesideBody) pairs.push(`{${previousName}}{${name}}`);
    previousName = name;
    previousEnd = match.index! + match[0].length;
  }
  return pairs;
}

/** The template with `{body}` as the exact received bytes and the other placeholders as header values or the URL. */
function signedContent(template: string, values: Record<string, string>, rawBody: Uint8Array): Uint8Array {
  const parts: Uint8Array[] = [];
  let last = 0;
  for (const match of template.matchAll(PLACEHOLDER)) {
    parts.push(utf8Bytes(template.slice(last, match.index)));
    parts.push(match[1] === "body" ? rawBody : utf8Bytes(values[match[1]!] ?? ""));
    last = match.index! + match[0].length;
  }
  parts.push(utf8Bytes(template.slice(last)));
  return concatBytes(...parts);
}

function keyFor(secret: string, options: ProviderOptions): VerificationKey | null {
  const { algorithm, secretEncoding } = settings(options);
  if (algorithm === "ed25519") {
    const publicKey = /^[0-9a-fA-F]{64}$/.test(secret) ? decodeHex(secret) : decodeBase64(secret);
    return publicKey && publicKey.length === 32 ? { algorithm, material: publicKey } : null;
  }
  const material =
    secretEncoding === "base64"
      ? decodeBase64(secret)
      : secretEncoding === "hex"
        ? decodeHex(secret)
        : utf8Bytes(secret);
  return material && material.length > 0 ? { algorithm, material } : null;
}

function read(input: DeliveryInput) {
  const config = settings(input.options);
  const header = readHeader(input.headers, config.signatureHeader);
  if (!header) return "missing-signature" as const;
  const entries = config.separator ? boundedEntries(header, config.separator) : [header];
  if (!entries) return "malformed-signature" as const;
  const candidates = entries
    .filter((entry) => entry.startsWith(config.prefix))
    .map((entry) => entry.slice(config.prefix.length));

  const values: Record<string, string> = { url: input.url };
  if (config.idHeader) {
    const id = readHeader(input.headers, config.idHeader);
    if (!id) return "missing-signature" as const;
    values.id = id;
  }
  let signedAt: number | undefined;
  if (config.timestampHeader) {
    const timestampText = readHeader(input.headers, config.timestampHeader);
    if (!timestampText) return "missing-signature" as const;
    const parsed = parseUnixSeconds(timestampText, config.timestampInMilliseconds ? "ms" : "s");
    if (parsed === null) return "malformed-signature" as const;
    values.timestamp = timestampText;
    signedAt = parsed;
  }
  return {
    signatures: presentedSignatures(candidates, config.encoding, config.algorithm),
    signedAt,
    signedContent: signedContent(config.template, values, input.rawBody),
  };
}

/**
 * Whether the signature covers the key: a JSON path always is (the signed content must include {body}); a header
 * only when it is the `id_header` the template signs as {id}.
 */
function keyHeaderSigned(options: ProviderOptions, keyHeader: string | undefined): boolean {
  if (keyHeader === undefined) return true;
  const { idHeader, template } = settings(options);
  return idHeader !== undefined && idHeader.toLowerCase() === keyHeader.toLowerCase() && template.includes("{id}");
}

export const generic = signedAdapter({
  provider: "generic",
  keptHeaders: ["content-type", "user-agent"],
  read,
  keyFor,

  async identify({ input, timestampAgeSeconds }) {
    const options = input.options;
    const payload = parseJsonBody(input.rawBody);
    const keyHeader = optionString(options, "event_key_header");
    const typeHeader = optionString(options, "type_header");
    const described = describePayload(payload, options, {});
    return event(
      {
        ...(await eventKeyOf(
          keyHeader
            ? readHeader(input.headers, keyHeader)
            : stringAtPath(payload, optionString(options, "event_key_path")),
          input.rawBody,
          { signed: keyHeaderSigned(options, keyHeader) },
        )),
        ...described,
        eventType: typeHeader ? readHeader(input.headers, typeHeader) : described.eventType,
      },
      timestampAgeSeconds,
    );
  },

  validateOptions(options) {
    const problems: string[] = [];
    const config = settings(options);
    if (!config.signatureHeader) problems.push("generic provider needs signature_header");
    if (!ALGORITHMS.includes(config.algorithm)) problems.push(`algorithm must be one of ${ALGORITHMS.join(", ")}`);
    if (!ENCODINGS.includes(config.encoding)) problems.push(`encoding must be one of ${ENCODINGS.join(", ")}`);
    if (!SECRET_ENCODINGS.includes(config.secretEncoding))
      problems.push(`secret_encoding must be one of ${SECRET_ENCODINGS.join(", ")}`);
    if (options.timestamp_unit !== undefined && options.timestamp_unit !== "s" && options.timestamp_unit !== "ms") {
      problems.push('timestamp_unit must be "s" or "ms"');
    }
    const placeholders = [...config.template.matchAll(PLACEHOLDER)].map((match) => match[1]!);
    for (const name of placeholders.filter((placeholder) => !KNOWN_PLACEHOLDERS.has(placeholder))) {
      problems.push(`signed_content has unknown placeholder {${name}} (known: {body}, {timestamp}, {id}, {url})`);
    }
    if (!placeholders.includes("body")) problems.push("signed_content must include {body}");
    if (placeholders.includes("timestamp") && !config.timestampHeader)
      problems.push("signed_content uses {timestamp} but timestamp_header is not set");
    if (placeholders.includes("id") && !config.idHeader)
      problems.push("signed_content uses {id} but id_header is not set");
    // Options that would check or key on what the signature leaves out: a captured delivery could then be replayed
    // with a fresh time or under a new key. The source is refused until its table says what the sender signs.
    if (config.timestampHeader && !placeholders.includes("timestamp")) {
      problems.push(
        "timestamp_header is set but signed_content does not include {timestamp}: an unsigned time bounds no replay",
      );
    }
    const keyHeader = optionString(options, "event_key_header");
    if (keyHeader && !keyHeaderSigned(options, keyHeader)) {
      problems.push(
        "event_key_header must be the id_header that signed_content signs as {id} (an unsigned key header lets a replay pass as a new event); or use event_key_path",
      );
    }
    for (const pair of ambiguousNeighbours(config.template)) {
      problems.push(
        `signed_content puts ${pair} with nothing between them: the signed bytes split there more than one way, so a captured delivery could be resent as another id or body (put the sender's separator between them)`,
      );
    }
    if (options.event_key_header !== undefined && options.event_key_path !== undefined) {
      problems.push("set event_key_header or event_key_path, not both");
    }
    return problems;
  },
});
