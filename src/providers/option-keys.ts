/**
 * Every key of a `[vars.SOURCES.<name>]` table an adapter reads, with what it means: the one list of them. An
 * adapter sees its source's table as ProviderOptions, which has these keys and no others, so reading a key not
 * listed here does not compile; src/sources/source-schema.ts takes these with the source's own keys, and refuses
 * any other key as a typo (a misspelt option would otherwise be ignored in silence). Each adapter checks the
 * values of the keys it reads itself (validateOptions); docs/providers.md says which sender reads which.
 */
export const PROVIDER_OPTIONS = {
  tolerance_seconds: "How far a signed time may be from now, in seconds, for a sender that signs one",
  type_path: "Dotted JSON path of the event type in the body",
  subject_path: "Dotted JSON path of the id of the object the event is about",
  version_path: "Dotted JSON path of the object's version or sequence number",
  occurred_at_path: "Dotted JSON path of when the event happened",
  verify_token: "The Worker secret (or a list of them) a challenge handshake's verify token is checked against",
  public_url: "The exact URL the sender was configured with, for a sender that signs its URL",
  public_origin: "Twilio: the public origin the signed URL is rebuilt with",
  notification_url: "Square: the notification URL the subscription was created with (Square signs it)",
  client_id: "Plaid: the client id key requests are made with",
  environment: "Plaid: the environment whose keys verify deliveries",
  signature_version: "AWS SNS: 2 to accept only SHA256withRSA messages",
  max_age: "AWS SNS: the oldest signed Timestamp accepted",
  signature_header: "generic: the header carrying the signature",
  algorithm: "generic: the signature algorithm",
  encoding: "generic: how the signature is encoded",
  signature_prefix: "generic: text before the signature in its header",
  signature_separator: "generic: what separates several signatures in the header",
  signed_content: "generic: the signed bytes, from {body}, {timestamp}, {id} and {url}",
  id_header: "generic: the header signed as {id}",
  timestamp_header: "generic: the header signed as {timestamp}",
  timestamp_unit: 'generic: "s" or "ms", the unit of the timestamp header',
  secret_encoding: "generic: how the secret is encoded",
  event_key_header: "generic: the header holding the event key (the signed id_header)",
  event_key_path: "generic: dotted JSON path of the event key in the body",
  type_header: "generic: the header holding the event type",
} as const satisfies Record<string, string>;

export type ProviderOptionKey = keyof typeof PROVIDER_OPTIONS;
/** A source's table as an adapter reads it: only the keys of PROVIDER_OPTIONS. */
export type ProviderOptions = { readonly [Key in ProviderOptionKey]?: unknown };
